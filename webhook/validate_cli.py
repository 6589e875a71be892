"""`virtualtarget validate -f FILE…`: the webhook's defaulting and validation, offline.

For CI pipelines before anything reaches a cluster: each VirtualTargetClass, ExporterSet
and Exporter in the files is defaulted and validated exactly as the webhook would
(cross-object checks against the classes in the same files), the defaulted objects are
printed as YAML, and the errors as `FILE: Kind/name: field error`. Exit 1 on a denial.
Kinds the project models but does not serve (KubeVirt's VirtualMachineInstance) are
checked against their generated model only. `--allowed-image-prefixes` and
`--require-image-digest` apply the administrator's image allow-list as the webhook does.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from api.fielderrors import FieldError
from api.imagepolicy import ImagePolicy, add_flags, from_flags
from api.modelcheck import model_errors
from webhook.admission import Admission
from webhook.clusterview import StaticView
from webhook.decode import AdmissionRequest
from webhook.defaulter import default_object
from webhook.routes import ENDPOINTS, KINDS, Role
from webhook.schemas import crd_schema

__all__ = ["configure", "run"]

_VALIDATE = {
    endpoint.kind.kind: endpoint for endpoint in ENDPOINTS if endpoint.role is Role.VALIDATE
}
# Modelled, not served: kind -> its generated module (imported only when such a kind is seen).
MODELLED = {"VirtualMachineInstance": "api.models.kubevirt.virtualmachineinstance"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        type=Path,
        nargs="+",
        action="extend",
        required=True,
        metavar="FILE",
        help="manifests (YAML, several documents per file)",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default="default",
        help="namespace of objects that name none (default: default)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors and warnings")
    add_flags(parser)


def _documents(path: Path) -> Iterator[Mapping[str, Any]]:
    for document in yaml.safe_load_all(path.read_text()):
        if isinstance(document, Mapping) and document.get("kind") == "List":
            yield from (item for item in document.get("items") or [] if isinstance(item, Mapping))
        elif isinstance(document, Mapping):
            yield document


class ManifestError(Exception):
    """A file that cannot be read as manifests; the message names file and line."""


def _load(files: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    loaded = []
    for path in files:
        try:
            for document in _documents(path):
                loaded.append((path, dict(document)))
        except OSError as exc:
            raise ManifestError(f"{path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            raise ManifestError(
                f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"
            ) from None
    return loaded


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return ""
    return str(metadata.get("name") or metadata.get("generateName") or "")


def _request(obj: dict[str, Any], namespace: str) -> AdmissionRequest:
    kind = KINDS[str(obj["kind"])]
    raw = obj.get("metadata")
    metadata: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return AdmissionRequest(
        uid="offline",
        group=kind.group,
        version=kind.version,
        kind=kind.kind,
        operation="CREATE",
        namespace=str(metadata.get("namespace") or namespace),
        name=_name(obj),
        object=obj,
        old_object=None,
        dry_run=True,
    )


def _modelled_errors(obj: dict[str, Any]) -> list[FieldError]:
    kind = str(obj["kind"])
    model = getattr(importlib.import_module(MODELLED[kind]), kind)
    return model_errors(model, obj)


async def _check(
    objects: list[tuple[Path, dict[str, Any]]],
    namespace: str,
    quiet: bool,
    image_policy: ImagePolicy | None = None,
) -> int:
    defaulted = [(path, obj, obj.get("kind") in KINDS) for path, obj in objects]
    results: list[tuple[Path, dict[str, Any]]] = []
    for path, obj, served in defaulted:
        results.append(
            (path, default_object(str(obj["kind"]), obj, crd_schema)[0] if served else obj)
        )
    admission = Admission(
        crd_schema, StaticView([obj for _, obj in results], namespace), image_policy=image_policy
    )
    denied = 0
    for path, obj in results:
        if obj.get("kind") in MODELLED:
            errors = _modelled_errors(obj)
            for error in errors:
                print(f"{path}: {obj['kind']}/{_name(obj)}: {error}", file=sys.stderr)
            denied += 1 if errors else 0
            continue
        if obj.get("kind") not in KINDS:
            continue
        request = _request(obj, namespace)
        outcome = await admission.review(_VALIDATE[request.kind], request, budget=1.0)
        where = f"{path}: {request.kind}/{request.name}"
        for warning in outcome.warnings:
            print(f"{where}: warning: {warning}", file=sys.stderr)
        if not outcome.allowed:
            denied += 1
            for error in outcome.errors:
                print(f"{where}: {error}", file=sys.stderr)
            if not outcome.errors:
                print(f"{where}: {outcome.message}", file=sys.stderr)
    if not quiet and not denied:  # all or nothing, as an apply would be
        yaml.safe_dump_all([obj for _, obj in results], sys.stdout, sort_keys=False)
    if denied:
        print(f"{denied} object(s) denied", file=sys.stderr)
    return 1 if denied else 0


def run(args: argparse.Namespace) -> int:
    try:
        image_policy = from_flags(args)
    except ValueError as exc:
        print(f"virtualtarget validate: --allowed-image-prefixes: {exc}", file=sys.stderr)
        return 2
    try:
        objects = _load(args.files)
    except ManifestError as exc:
        print(f"virtualtarget validate: {exc}", file=sys.stderr)
        return 2
    known = [*KINDS, *MODELLED]
    if not any(obj.get("kind") in known for _, obj in objects):
        print(f"virtualtarget validate: no {', '.join(known)} in the given files", file=sys.stderr)
        return 2
    return asyncio.run(_check(objects, args.namespace, args.quiet, image_policy))
