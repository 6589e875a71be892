"""Shared helpers for the webhook tests (no tests here): sample objects, AdmissionReview
builders and a strict JSON Patch applier."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

from webhook.schemas import crd_schema

# The generated CRD schemas: the tests default and type-check against the real thing.
schema_source = crd_schema


GROUP = "virtualtarget.jumpstarter.dev"
VERSION = "v1alpha1"


def a_class(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "VirtualTargetClass",
        "metadata": {"name": "qemu", "namespace": "lab"},
        "spec": {"provisioner": "qemu.jumpstarter.dev", **spec},
    }


def a_set(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "virtualTargetClassName": "qemu",
        "selector": {"matchLabels": {"pool": "a"}},
        "template": {
            "metadata": {"labels": {"pool": "a"}},
            "spec": {"drivers": [{"name": "power", "type": "jumpstarter_driver_qemu.Qemu"}]},
        },
    }
    base.update(spec)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ExporterSet",
        "metadata": {"name": "pool-a", "namespace": "lab"},
        "spec": base,
    }


def an_exporter(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Exporter",
        "metadata": {"name": "e1", "namespace": "lab"},
        "spec": dict(spec),
    }


def review(
    obj: Mapping[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    kind: str | None = None,
    uid: str = "3f1c0f4e-0000-4000-8000-000000000001",
) -> dict[str, Any]:
    source = obj or old or {}
    kind = kind or str(source.get("kind", "ExporterSet"))
    group, _, version = str(source.get("apiVersion", f"{GROUP}/{VERSION}")).rpartition("/")
    metadata = source.get("metadata") or {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "operation": operation,
            "name": metadata.get("name", ""),
            "namespace": metadata.get("namespace", ""),
            "object": copy.deepcopy(obj) if obj is not None else None,
            "oldObject": copy.deepcopy(old) if old is not None else None,
            "dryRun": False,
        },
    }


def decoded_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    patch = response.get("patch")
    if patch is None:
        return []
    operations: list[dict[str, Any]] = json.loads(base64.b64decode(patch))
    return operations


def apply_patch(doc: Any, operations: list[dict[str, Any]]) -> Any:
    """A strict RFC 6902 `add`/`replace` applier: fails on a missing parent, as the
    apiserver's does."""
    doc = copy.deepcopy(doc)
    for op in operations:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if op["op"] == "replace":
            if isinstance(parent, list):
                parent[int(last)]
            elif last not in parent:
                raise KeyError(op["path"])
        if op["op"] not in ("add", "replace"):
            raise ValueError(op["op"])
        if isinstance(parent, list):
            parent.insert(int(last), op["value"]) if op["op"] == "add" else parent.__setitem__(
                int(last), op["value"]
            )
        else:
            parent[last] = op["value"]
    return doc
