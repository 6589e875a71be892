"""The floor of a fill: the objects a fill made, written again by the benchmark alone.

Once `bench scale` has filled its pools and stopped its reconciler and the credential
stand-in, this writes again, into a namespace of its own, what no fill of those pools can
do without: each ExporterSet (through both webhooks), and for each instance its Exporter
(through both webhooks), Jumpstarter's credential Secret and the Exporter's status (what
Jumpstarter's controller writes), the config Secret and the Pod. The bodies are the fill's
own, read back, so each write costs kube-apiserver what it cost in the fill. Fewer watch
them than watched the fill (the reconciler's watches are gone), nothing reconciles them,
and the client reads no answer back into objects: the time it takes is the least any fill
of these pools could take on this machine and this apiserver, whoever wrote it. Its ratio
to the bare writes is the floor under the fill's."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pool.model.access import EXPORTERS, EXPORTERSETS, Resource
from pool.model.keys import NAME_LABEL, SET_LABEL

__all__ = [
    "FLOOR_NAMESPACE",
    "Floor",
    "Instance",
    "custom_args",
    "fresh",
    "group",
    "read_back",
    "write_floor",
]

FLOOR_NAMESPACE = "scale-floor"
# Server-set metadata: a create must not carry it (a fill's creates never did).
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


@dataclass
class Instance:
    """One instance's objects as the fill left them, in the order a fill writes them."""

    exporter: dict[str, Any]
    credential: dict[str, Any] | None = None  # Jumpstarter's token Secret
    config: list[dict[str, Any]] = field(default_factory=list)  # its config Secret(s)
    pod: dict[str, Any] | None = None

    def complete(self) -> bool:
        return self.credential is not None and bool(self.config) and self.pod is not None

    @property
    def writes(self) -> int:
        """Exporter, its status, credential, config Secret(s), Pod."""
        return 4 + len(self.config)


@dataclass
class Floor:
    sets: int = 0
    instances: int = 0
    writes: int = 0
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # share of a core while writing


def custom_args(resource: Resource, namespace: str) -> tuple[str, str, str, str]:
    """Where `resource` is in `namespace`, as the custom-objects API's first arguments."""
    return resource.group, resource.version, namespace, resource.plural


def fresh(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """`obj` as its creator sent it, into `namespace`: no server fields, no status."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = {**metadata, "namespace": namespace}
    if body.get("kind") == "Pod":
        body["spec"] = {k: v for k, v in body["spec"].items() if k != "nodeName"}
    return body


def _owner(obj: dict[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Exporter":
            return str(ref.get("name"))
    return None


def read_back(
    api_client: Any, namespaces: list[str]
) -> tuple[list[dict[str, Any]], list[Instance]]:
    """The pools' sets and every complete instance, read from `namespaces`."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    sets: list[dict[str, Any]] = []
    instances: list[Instance] = []
    for namespace in namespaces:
        sets += custom.list_namespaced_custom_object(*custom_args(EXPORTERSETS, namespace))["items"]
        exporters = custom.list_namespaced_custom_object(
            *custom_args(EXPORTERS, namespace), label_selector=SET_LABEL
        )["items"]
        secrets = _dicts(api_client, core.list_namespaced_secret(namespace).items)
        pods = _dicts(
            api_client, core.list_namespaced_pod(namespace, label_selector=NAME_LABEL).items
        )
        instances += group(exporters, secrets, pods)
    return sets, instances


def group(
    exporters: list[dict[str, Any]], secrets: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> list[Instance]:
    """Each Exporter with the Secrets and the Pod it controls; only the complete ones."""
    by_name = {e["metadata"]["name"]: Instance(e) for e in exporters}
    for secret in secrets:
        instance = by_name.get(_owner(secret) or "")
        if instance is None:
            continue
        credential = (instance.exporter.get("status") or {}).get("credential") or {}
        if secret["metadata"]["name"] == credential.get("name"):
            instance.credential = secret
        elif NAME_LABEL in (secret["metadata"].get("labels") or {}):
            instance.config.append(secret)
    for pod in pods:
        instance = by_name.get(_owner(pod) or "")
        if instance is not None:
            instance.pod = pod
    return [i for i in by_name.values() if i.complete()]


def _dicts(api_client: Any, models: list[Any]) -> list[dict[str, Any]]:
    return [api_client.sanitize_for_serialization(model) for model in models]


def write_floor(
    api_client: Any,
    sets: list[dict[str, Any]],
    instances: list[Instance],
    writers: int,
    cpu_share: Callable[[float], dict[str, float]],
    namespace: str = FLOOR_NAMESPACE,
) -> Floor:
    """Write the sets, then each instance's objects in a fill's order, from `writers`
    threads into `namespace` (which holds the sets' class already). `cpu_share(seconds)`
    gives each process's share of a core since the writes started."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    raw = {"_preload_content": False}  # the answer is not read into a model

    def write_set(obj: dict[str, Any]) -> None:
        custom.create_namespaced_custom_object(
            *custom_args(EXPORTERSETS, namespace), fresh(obj, namespace), **raw
        )

    def write_instance(instance: Instance) -> None:
        exporter = instance.exporter
        name = exporter["metadata"]["name"]
        custom.create_namespaced_custom_object(
            *custom_args(EXPORTERS, namespace), fresh(exporter, namespace), **raw
        )
        assert instance.credential is not None and instance.pod is not None
        core.create_namespaced_secret(namespace, fresh(instance.credential, namespace), **raw)
        custom.patch_namespaced_custom_object_status(
            *custom_args(EXPORTERS, namespace), name,
            {"status": exporter.get("status") or {}}, **raw,
        )  # fmt: skip
        for secret in instance.config:
            core.create_namespaced_secret(namespace, fresh(secret, namespace), **raw)
        core.create_namespaced_pod(namespace, fresh(instance.pod, namespace), **raw)

    started = time.monotonic()
    with ThreadPoolExecutor(writers) as pool:
        for future in [pool.submit(write_set, s) for s in sets]:
            future.result()
        for future in [pool.submit(write_instance, i) for i in instances]:
            future.result()
    seconds = time.monotonic() - started
    writes = len(sets) + sum(i.writes for i in instances)
    return Floor(len(sets), len(instances), writes, seconds, cpu_share(seconds))
