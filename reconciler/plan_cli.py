"""`virtualtarget plan [-n NS] [SET]`: what the reconciler would do now to each
ExporterSet, and why. Read-only.

It lists the resources the reconciler watches (list calls only, and a get of the
namespace given with -n; any kubeconfig that may read them will do), fills the
reconciler's own caches with them (`Controller.snapshot`) and asks the reconciler's
own reading and planning code (`Controller.decide`, the first half of every pass) for
each set's plan. So what it prints is what a pass started now would do, in the words
the reconciler logs and puts in its Events (`pool.rules.explain`). The text and the
JSON shape are described in `pool.rules.planreport`.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from typing import Any

from api.imagepolicy import add_flags, from_flags
from reconciler.cli import DEFAULT_PROVISIONER

__all__ = ["configure", "run"]

EXIT_CODES = """exit codes:
  0  the plans were printed
  1  the named ExporterSet does not exist
  2  bad input or no answer: kubeconfig missing or unusable, apiserver unreachable or
     refusing a read, unknown namespace or provisioner"""


def configure(parser: argparse.ArgumentParser) -> None:
    from pool.rules.explain import VERBS
    from pool.rules.planreport import JSON_SHAPE

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        f"{EXIT_CODES}\n\n-o json prints (keys may be added, none renamed or removed):\n"
        f"{textwrap.indent(JSON_SHAPE, '  ')}"
        + textwrap.fill(f"verb: one of {', '.join(VERBS)}", 88, subsequent_indent="  ")
    )
    parser.add_argument(
        "set", nargs="?", metavar="SET", help="only this ExporterSet (in -n, else the context's)"
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)"
    )
    parser.add_argument("-n", "--namespace", help="only this namespace (default: all)")
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="(default: text)"
    )
    parser.add_argument(
        "--provisioner",
        default=DEFAULT_PROVISIONER,
        help="plan as the reconciler of this provisioner does (default: %(default)s)",
    )
    add_flags(parser)  # plan as a reconciler given the same image allow-list does


class _Refused(Exception):
    """A one-line reason to stop, with the exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def run(args: argparse.Namespace) -> int:
    try:
        print(_plans(args))
    except _Refused as exc:
        print(f"plan: {exc}", file=sys.stderr)
        return exc.code
    return 0


def _plans(args: argparse.Namespace) -> str:
    from urllib3.exceptions import HTTPError

    from pool.model.access import EXPORTERSETS
    from pool.rendering.provisioners import provisioner
    from pool.rules.planreport import SetPlan, as_json, as_text
    from reconciler.runtime.cache import key_of
    from reconciler.runtime.controller import Controller
    from reconciler.runtime.kube import ApiError, ConfigError, Kube, api_client

    try:
        plugin = provisioner(args.provisioner)
    except KeyError as exc:
        raise _Refused(str(exc.args[0])) from None
    try:
        image_policy = from_flags(args)
    except ValueError as exc:
        raise _Refused(f"--allowed-image-prefixes: {exc}") from None
    kubeconfig = (
        args.kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    )
    try:
        client = api_client(kubeconfig)
    except ConfigError as exc:
        raise _Refused(str(exc)) from None
    namespace = args.namespace or (_context_namespace(kubeconfig) if args.set else None)
    controller = Controller(Kube(client), plugin, namespace=namespace, image_policy=image_policy)
    try:
        if args.namespace:
            _require_namespace(client, args.namespace)
        controller.snapshot()
    except ApiError as exc:
        if exc.status == 404:
            raise _Refused("the ExporterSet CRD is not installed (404 listing it)") from None
        raise _Refused(f"the apiserver refused a read: {exc}") from None
    except HTTPError as exc:
        reason = str(getattr(exc, "reason", None) or exc).split(">: ")[-1]
        raise _Refused(
            f"cannot reach the apiserver {client.configuration.host}: {reason}"
        ) from None

    sets = controller.informers[EXPORTERSETS].items()
    if args.set:
        sets = [s for s in sets if key_of(s)[1] == args.set]
        if not sets:
            raise _Refused(f'ExporterSet "{args.set}" not found in namespace "{namespace}"', 1)
    now = controller.clock()
    entries = []
    for exporter_set in sorted(sets, key=lambda s: key_of(s)):
        spec = exporter_set.get("spec") or {}
        named = (*key_of(exporter_set), str(spec.get("virtualTargetClassName", "")))
        decided = controller.decide(exporter_set, now)
        if isinstance(decided, str):
            entries.append(SetPlan(*named, skipped=decided))
        else:
            result, observed = decided
            awaiting = {name: observed.observation.awaiting[name] for name in result.awaiting}
            provisioned = observed.observation.provisioned
            elsewhere = {
                name: there
                for name, views in provisioned.items()
                if (there := tuple(v for v in views if v.target))
            }
            entries.append(SetPlan(*named, result, awaiting, elsewhere=elsewhere))
    if args.output == "json":
        return as_json(entries, now, plugin.name)
    return as_text(entries, f'namespace "{namespace}"' if namespace else "any namespace")


def _context_namespace(kubeconfig: str) -> str:
    """The namespace of the kubeconfig's current context, as kubectl uses it."""
    from kubernetes import config

    _, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    return str((active or {}).get("context", {}).get("namespace") or "default")


def _require_namespace(client: Any, name: str) -> None:
    """Refuse an unknown namespace; a kubeconfig that may not read namespaces goes on
    (its listings of a namespace that does not exist are simply empty)."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    try:
        CoreV1Api(client).read_namespace(name)
    except ApiException as exc:
        if exc.status == 404:
            raise _Refused(f'namespace "{name}" not found') from None
        if exc.status != 403:
            raise _Refused(f"the apiserver refused a read: {exc.status} {exc.reason}") from None
