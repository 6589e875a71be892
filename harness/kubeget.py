"""`kubectl get ARGS -o json`, answered in this process for the plain forms the tests and
the harness poll.

The tests wait by polling (`tests.e2e.objects.wait_for`, three times a second), and a
kubectl start costs about 0.1 CPU-second: thousands of polls in a run took more CPU than
any other part of the suite but Jumpstarter's own processes (docs/measurements.md). So a
read of one kind, by name or by namespace and label selector, is a GET on the apiserver's
REST path through the Python client, shaped as kubectl prints it: a `List` whose items
carry `apiVersion` and `kind`, `managedFields` dropped unless asked for, and the error
kubectl would print when the object does not exist. Anything else (several kinds, field
selectors, output flags, a name this table does not know) runs kubectl itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlaneError
from pool.model.keys import GROUP

__all__ = ["Query", "find_json", "get", "get_json", "parse"]


@dataclass(frozen=True)
class Kind:
    group_version: str  # "v1" for the core group
    plural: str
    kind: str
    namespaced: bool = True

    def path(self, namespace: str, name: str) -> str:
        root = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{root}{scope}/{self.plural}" + (f"/{name}" if name else "")


_OURS = f"{GROUP}/v1alpha1"
_JUMPSTARTER = "jumpstarter.dev/v1alpha1"
_KINDS = (
    (Kind(_OURS, "exportersets", "ExporterSet"), ("exporterset", "exportersets")),
    (
        Kind(_OURS, "virtualtargetclasses", "VirtualTargetClass"),
        ("virtualtargetclass", "virtualtargetclasses"),
    ),
    (Kind(_JUMPSTARTER, "exporters", "Exporter"), ("exporter", "exporters")),
    (Kind(_JUMPSTARTER, "leases", "Lease"), ("lease.jumpstarter.dev", "leases.jumpstarter.dev")),
    (
        Kind("coordination.k8s.io/v1", "leases", "Lease"),
        ("lease.coordination.k8s.io", "leases.coordination.k8s.io"),
    ),
    (Kind("events.k8s.io/v1", "events", "Event"), ("event.events.k8s.io", "events.events.k8s.io")),
    (Kind("v1", "pods", "Pod"), ("pod", "pods", "po")),
    (Kind("v1", "secrets", "Secret"), ("secret", "secrets")),
    (Kind("v1", "configmaps", "ConfigMap"), ("configmap", "configmaps", "cm")),
    (Kind("v1", "events", "Event"), ("event", "events", "ev")),
    (Kind("v1", "nodes", "Node", namespaced=False), ("node", "nodes", "no")),
    (Kind("v1", "serviceaccounts", "ServiceAccount"), ("serviceaccount", "serviceaccounts", "sa")),
    (Kind("apps/v1", "deployments", "Deployment"), ("deployment", "deployments", "deploy")),
    (Kind("kubevirt.io/v1", "kubevirts", "KubeVirt"), ("kubevirt", "kubevirts", "kv")),
)
# kubectl's names for each kind (a bare `lease` is ambiguous: it is left to kubectl)
KINDS: dict[str, Kind] = {alias: kind for kind, aliases in _KINDS for alias in aliases}


@dataclass(frozen=True)
class Query:
    kind: Kind
    name: str = ""
    namespace: str = ""
    selector: str = ""
    managed_fields: bool = False


def parse(args: Sequence[str]) -> Query | None:
    """The query `kubectl get ARGS` makes, when it is one this module answers."""
    positional: list[str] = []
    options: dict[str, str] = {}
    managed = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--show-managed-fields":
            managed = True
        elif arg in ("-n", "--namespace", "-l", "--selector") and rest:
            options["namespace" if arg in ("-n", "--namespace") else "selector"] = rest.pop(0)
        elif arg.startswith(("--namespace=", "--selector=")):
            key, _, value = arg[2:].partition("=")
            options[key] = value
        elif arg.startswith("-"):
            return None
        else:
            positional.append(arg)
    if not 1 <= len(positional) <= 2 or positional[0] not in KINDS:
        return None
    name = positional[1] if len(positional) == 2 else ""
    if name and options.get("selector"):
        return None  # kubectl refuses a name with a selector: let it say so
    return Query(KINDS[positional[0]], name, options.get("namespace", "default"),
                 options.get("selector", ""), managed)  # fmt: skip


_CLIENTS: dict[str, Any] = {}  # a kubeconfig's text -> kubernetes.client.ApiClient
_LOCK = threading.Lock()


def _client(plane: Any) -> Any:
    # By what the kubeconfig says, not where it is: a cluster started again in the same
    # folder has a new port, token and CA.
    key = Path(plane.kubeconfig).read_text()
    with _LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = plane.api_client()
        return _CLIENTS[key]


def _shaped(obj: dict[str, Any], query: Query) -> dict[str, Any]:
    obj.setdefault("apiVersion", query.kind.group_version)
    obj.setdefault("kind", query.kind.kind)
    if not query.managed_fields:
        obj.get("metadata", {}).pop("managedFields", None)
    return obj


def get(plane: Any, query: Query) -> Any:
    """What `kubectl get ... -o json` prints for `query`; ControlPlaneError as kubectl fails."""
    client = _client(plane)
    params = [("labelSelector", query.selector)] if query.selector else []
    try:
        method, url, headers, body, post = client.param_serialize(
            "GET", query.kind.path(query.namespace, query.name), query_params=params,
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        )  # fmt: skip
        response = client.call_api(method, url, headers, body, post, _request_timeout=60)
        response.read()
    except Exception as error:  # the apiserver unreachable (stopped, restarting)
        raise ControlPlaneError(f"kubectl get (in process) failed: {error}") from error
    if response.status != 200:
        reason = {404: "NotFound", 403: "Forbidden"}.get(response.status, str(response.status))
        detail = _message(response.data) or f"{query.kind.plural} {query.name!r}"
        raise ControlPlaneError(
            f"kubectl get (in process) failed: Error from server ({reason}): {detail}"
        )
    found: dict[str, Any] = json.loads(response.data)
    if query.name:
        return _shaped(found, query)
    items = [_shaped(item, query) for item in found.get("items") or []]
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def _message(body: Any) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (TypeError, ValueError):
        return ""


def get_json(plane: Any, *args: str) -> Any:
    """What `kubectl get ARGS -o json` prints: answered in process where this module can,
    else by kubectl; ControlPlaneError where it fails."""
    query = parse(args)
    target = getattr(plane, "plane", plane)  # a node cluster reads through its plane
    if query is not None and hasattr(target, "api_client"):
        return get(target, query)
    return json.loads(plane.kubectl("get", *args, "-o", "json").stdout)


def find_json(plane: Any, *args: str) -> Any | None:
    """`get_json`, or None where kubectl would fail (not found, the apiserver away)."""
    try:
        return get_json(plane, *args)
    except ControlPlaneError:
        return None
