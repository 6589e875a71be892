"""Pools whose instance Pods run on the node: what the node tier's pool tests share.

A pool here is the product's reconciler (a host process on the node cluster's admin
kubeconfig, as the loopback tests run it) and Jumpstarter's released controller and router
serving the pool's namespace (`harness.jumpstarter`), reached on the node IP, where the
Pods dial them: that controller issues each Exporter's credential, registers the exporter
its Pod runs, and assigns, pends and ends the Leases. Each test gets a namespace of its own
(`node_jumpstarters`) that enforces the Pod Security level the rendered instance Pod meets
(`INSTANCE_POD_SECURITY`).

`History` records every Exporter and Pod of a namespace from a watch (each ADDED and
DELETED by uid, with its time), so a test can say how many instances were ever created
and whether one was removed, however short its life.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.jumpstarter import Jumpstarter, JumpstarterSupply
from harness.stack import running_reconciler
from pool.model.jumpstarter import config_secret_name
from pool.model.keys import instance_selector
from pool.model.timefmt import parse_time
from tests.e2e.objects import (
    apply,
    assigned_exporter,
    exporter_set,
    get_json,
    virtual_target_class,
    wait_for,
)
from tests.exporters import DRIVERS

__all__ = [
    "INSTANCE_POD_SECURITY",
    "History",
    "Pool",
    "instance_namespace",
    "node_jumpstarters",
    "running_pool",
]

# The Pod Security level every layout's instance Pods meet (tests/e2e/test_pod_security_e2e.py
# asks kube-apiserver): the `sidecar` layout's runtime runs as root, which `restricted`
# refuses; the default layout's Pods, which run here, meet `restricted` too.
INSTANCE_POD_SECURITY = "baseline"

Obj = dict[str, Any]


def instance_namespace(cluster: Any, name: str) -> str:
    """A namespace enforcing the instance Pods' Pod Security level (and warning at
    `restricted`, so a Pod that would pass it says so)."""
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "pod-security.kubernetes.io/enforce": INSTANCE_POD_SECURITY,
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
            },
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    cluster.wait_for_namespace(name)  # its default ServiceAccount and root CA
    return name


def node_jumpstarters(cluster: Any, workdir: Path, prefix: str) -> JumpstarterSupply:
    """Namespaces `prefix-<random>` (`instance_namespace`), each served by its own
    Jumpstarter controller and router, reached at the node IP where the Pods dial them."""
    return JumpstarterSupply(
        cluster.plane,
        workdir,
        prefix,
        address=cluster.network.node_ip,
        make_namespace=lambda name: instance_namespace(cluster, name),
    )


@dataclass
class Event:
    at: float  # time.monotonic()
    kind: str  # ADDED, MODIFIED, DELETED
    obj: Obj

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


@dataclass
class History:
    """Every watch event of Exporters, Pods and Jumpstarter's Leases in one namespace, from
    when it starts."""

    api_client: Any
    namespace: str
    exporters: list[Event] = field(default_factory=list)
    pods: list[Event] = field(default_factory=list)
    leases: list[Event] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> History:
        from kubernetes import client

        custom, core = client.CustomObjectsApi(self.api_client), client.CoreV1Api(self.api_client)
        lists: list[tuple[Callable[..., Any], tuple[Any, ...], list[Event]]] = [
            (
                custom.list_namespaced_custom_object,
                ("jumpstarter.dev", "v1alpha1", self.namespace, "exporters"),
                self.exporters,
            ),
            (core.list_namespaced_pod, (self.namespace,), self.pods),
            (
                custom.list_namespaced_custom_object,
                ("jumpstarter.dev", "v1alpha1", self.namespace, "leases"),
                self.leases,
            ),
        ]
        for lister, args, sink in lists:
            thread = threading.Thread(target=self._watch, args=(lister, args, sink), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _watch(self, lister: Callable[..., Any], args: tuple[Any, ...], sink: list[Event]) -> None:
        from kubernetes import watch

        version = ""
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    lister,
                    *args,
                    resource_version=version or None,
                    timeout_seconds=5,
                    _preload_content=True,
                ):
                    obj = event["object"]
                    if not isinstance(obj, dict):
                        obj = self.api_client.sanitize_for_serialization(obj)
                    version = obj["metadata"].get("resourceVersion", version)
                    with self._lock:
                        sink.append(Event(time.monotonic(), event["type"], obj))
                    if self._stop.is_set():
                        break
            except Exception:  # a watch ends (410, timeout, restart): list again from now
                version = ""
                self._stop.wait(0.2)
            finally:
                stream.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def created(self, events: list[Event], after: float = 0.0) -> dict[str, Event]:
        """uid -> its ADDED event, for objects first seen after `after`."""
        with self._lock:
            seen: dict[str, Event] = {}
            for event in events:
                seen.setdefault(event.uid, event)
        return {uid: e for uid, e in seen.items() if e.at >= after and e.kind == "ADDED"}

    def timeline(self, uid: str) -> str:
        """One line per watch event of the Pod `uid`: what a failure message needs to tell
        an exit from a deletion (phase, deletion time and grace, container end times)."""
        with self._lock:
            events = [e for e in self.pods if e.uid == uid]
        lines = []
        for event in events:
            meta, status = event.obj["metadata"], event.obj.get("status") or {}
            ends = {
                c.get("name"): (c.get("state") or {}).get("terminated", {}).get("finishedAt")
                for c in status.get("containerStatuses") or []
            }
            lines.append(
                f"  {event.kind:8} {status.get('phase')} deletion "
                f"{meta.get('deletionTimestamp')} grace {meta.get('deletionGracePeriodSeconds')}"
                f" containers ended {ends}"
            )
        return "\n".join(lines)

    def deleted(self, events: list[Event]) -> dict[str, Event]:
        with self._lock:
            return {e.uid: e for e in events if e.kind == "DELETED"}


class Reconciler(Protocol):
    """What a pool reads of the reconciler serving it: a host process
    (`ReconcilerProcess`) or an installed Deployment
    (`tests.node.release_install.InstalledReconciler`)."""

    def log_tail(self, lines: int = 10) -> str: ...

    def check_alive(self) -> None: ...


@dataclass
class Pool:
    """One ExporterSet running on the node, and what the tests read of it."""

    cluster: Any
    jumpstarter: Jumpstarter
    name: str
    reconciler: Reconciler
    history: History
    created_at: float = 0.0  # time.monotonic() at the set's apply

    @property
    def namespace(self) -> str:
        return self.jumpstarter.namespace

    @property
    def selector(self) -> str:
        """The labels the set's instances carry, as `jmp create lease -l` takes them."""
        return f"pool={self.name}"

    # -- write ---------------------------------------------------------------------

    def apply(
        self,
        drivers: list[Obj] | None = None,
        annotations: dict[str, str] | None = None,
        **spec: Any,
    ) -> None:
        body = exporter_set(
            self.name, self.namespace, class_name="node", with_template=True, **spec
        )
        body["spec"]["template"]["spec"] = {"drivers": DRIVERS if drivers is None else drivers}
        if annotations:
            body["metadata"]["annotations"] = annotations
        if not self.created_at:
            self.created_at = time.monotonic()
        apply(self.cluster, body)

    def patch_set(self, change: Obj) -> None:
        self.cluster.kubectl(
            "patch",
            "exporterset",
            self.name,
            "-n",
            self.namespace,
            "--type=merge",
            "-p",
            json.dumps(change),
        )

    def lease(self, name: str, exporter: str = "", timeout: float = 60) -> str:
        """A Lease `name` by the pool's labels (pinned to `exporter` when given), requested
        with Jumpstarter's client and assigned by its controller; the Exporter it got."""
        self.jumpstarter.request_lease(self.selector, name, exporter=exporter)
        got: str = self.wait(
            f"Lease {name} assigned",
            lambda: assigned_exporter(self.cluster, self.namespace, name),
            timeout,
        )
        return got

    def release(self, name: str) -> float:
        """The client releases the Lease (`jmp delete lease`); the moment is taken before,
        since the reconciler may act before the command has exited."""
        released = time.monotonic()
        self.jumpstarter.release_lease(name)
        return released

    # -- read ----------------------------------------------------------------------

    def status(self) -> Obj:
        found = get_json(self.cluster, "exporterset", self.name, "-n", self.namespace)
        status: Obj = found.get("status") or {}
        return status

    def condition(self, kind: str) -> Obj:
        return next((c for c in self.status().get("conditions") or [] if c["type"] == kind), {})

    def exporters(self) -> list[Obj]:
        items: list[Obj] = get_json(
            self.cluster, "exporters", "-n", self.namespace, "-l", instance_selector(self.name)
        )["items"]
        return items

    def pods(self) -> list[Obj]:
        items: list[Obj] = get_json(self.cluster, "pods", "-n", self.namespace)["items"]
        return items

    def secrets(self) -> dict[str, Obj]:
        items = get_json(self.cluster, "secrets", "-n", self.namespace)["items"]
        return {s["metadata"]["name"]: s for s in items}

    def instance_secrets(self, exporter: str) -> tuple[str, str]:
        """The names of an instance's config Secret and of the credential Secret
        Jumpstarter's controller made for it (its `status.credential`)."""
        found = get_json(self.cluster, "exporter", exporter, "-n", self.namespace)
        credential = ((found.get("status") or {}).get("credential") or {}).get("name", "")
        return config_secret_name(exporter), str(credential)

    def running(self) -> list[Obj]:
        """Pods Running with their exporter container running, not being deleted."""
        result = []
        for pod in self.pods():
            if pod["metadata"].get("deletionTimestamp"):
                continue
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            exporter = next((s for s in statuses if s["name"] == "exporter"), {})
            if pod["status"].get("phase") == "Running" and "running" in exporter.get("state", {}):
                result.append(pod)
        return result

    def warm(self, count: int) -> bool:
        """The warm buffer is full as the set's status says it: podsRunning,
        readyReplicas and availableReplicas all at `count`."""
        status = self.status()
        return all(
            status.get(key) == count
            for key in ("podsRunning", "readyReplicas", "availableReplicas")
        )

    def wait_warm(self, count: int, timeout: float = 120) -> float:
        """Wait until `warm(count)`; the seconds it took from now."""
        started = time.monotonic()
        self.wait(f"the warm buffer at {count}", lambda: self.warm(count), timeout=timeout)
        return time.monotonic() - started

    def table(self) -> str:
        """What a user sees: `kubectl get exportersets`, and the Pod counters."""
        wide = self.cluster.kubectl("get", "exportersets", "-n", self.namespace).stdout
        columns = (
            "custom-columns=NAME:.metadata.name,PENDING:.status.podsPending,"
            "RUNNING:.status.podsRunning,FAILED:.status.podsFailed,"
            "UNKNOWN:.status.podsUnknown"
        )
        pods = self.cluster.kubectl(
            "get", "exportersets", "-n", self.namespace, "-o", columns
        ).stdout
        return wide + pods

    def describe(self) -> str:
        """The pool's state for a failure message: set, Exporters, Pods, reconciler log."""
        lines = [self.table()]
        for exporter in self.exporters():
            meta, status = exporter["metadata"], exporter.get("status") or {}
            conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
            lines.append(
                f"exporter {meta['name']} uid {meta['uid'][:8]} enabled "
                f"{exporter.get('spec', {}).get('enabled')} {conditions} "
                f"leaseRef {status.get('leaseRef')} deleting {bool(meta.get('deletionTimestamp'))}"
            )
        for pod in self.pods():
            meta, status = pod["metadata"], pod.get("status") or {}
            states = {
                s["name"]: next(iter(s.get("state") or {"?": 0}))
                for s in status.get("containerStatuses") or []
            }
            lines.append(
                f"pod {meta['name']} uid {meta['uid'][:8]} phase {status.get('phase')} "
                f"{states} deleting {bool(meta.get('deletionTimestamp'))}"
            )
        lines.append(f"reconciler log:\n  {self.reconciler.log_tail(40)}")
        return "\n".join(lines)

    def instance_logs(self, tail: int = 60) -> str:
        """Each instance Pod's log (`jmp run`: the exporter and its drivers), last lines."""
        parts = []
        for pod in self.pods():
            name = pod["metadata"]["name"]
            shown = self.cluster.kubectl(
                "logs", name, "-n", self.namespace, f"--tail={tail}", check=False
            )
            parts.append(f"log of {name}:\n{shown.stdout}{shown.stderr}")
        return "\n".join(parts)

    def wait(self, what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
        """`wait_for`, with the pool's state in the message when it times out."""
        try:
            return wait_for(what, probe, timeout=timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.describe()}") from None

    def lease_ready_s(self, lease: str) -> float:
        """The Lease's creation to its Ready condition turning True, from its own
        timestamps (whole seconds; the watch's first view of it Ready: once the Lease
        ends, Ready is False again and its transition is the end)."""
        for event in list(self.history.leases):
            conditions = (event.obj.get("status") or {}).get("conditions") or []
            ready = next((c for c in conditions if c["type"] == "Ready"), {})
            if event.name == lease and ready.get("status") == "True":
                created = parse_time(event.obj["metadata"]["creationTimestamp"])
                return (parse_time(ready["lastTransitionTime"]) - created).total_seconds()
        raise AssertionError(f"{lease} never seen Ready")

    def registered(self) -> set[str]:
        """The Exporters of this namespace that Jumpstarter's controller ever marked
        Registered (from the watch: one that registered and went counts too)."""
        return {
            event.name
            for event in list(self.history.exporters)
            if any(
                c["type"] == "Registered" and c["status"] == "True"
                for c in (event.obj.get("status") or {}).get("conditions") or []
            )
        }


@contextlib.contextmanager
def running_pool(
    cluster: Any,
    jumpstarter: Jumpstarter,
    workdir: Path,
    *,
    name: str = "pool",
    reconciler_args: tuple[str, ...] = (),
    parameters: Obj | None = None,
    class_spec: Obj | None = None,
    namespaced: bool = True,
    images: Obj | None = None,
    installed: Reconciler | None = None,
) -> Iterator[Pool]:
    """The class `node` (its exporter image the QEMU exporter image this project ships
    unless `images` says, `parameters`, and `class_spec`'s other fields), the reconciler
    and a History for the namespace `jumpstarter` serves; the set itself is the test's to
    apply (`Pool.apply`).
    The reconciler serves that namespace alone, or with `namespaced=False` the cluster (the
    install that reads Nodes); or it is `installed` already (a Deployment), and none starts."""
    namespace = jumpstarter.namespace
    images = images or {"exporter": {"image": QEMU_EXPORTER_IMAGE}}
    klass = virtual_target_class(
        "node", namespace, images=images, parameters=parameters or {}, **(class_spec or {})
    )
    apply(cluster, klass)
    history = History(cluster.plane.api_client(), namespace).start()
    try:
        with contextlib.ExitStack() as stack:
            reconciler = installed or stack.enter_context(
                running_reconciler(
                    cluster,
                    workdir,
                    extra=[
                        *(("--namespace", namespace) if namespaced else ()),
                        "--no-leader-election",
                        *reconciler_args,
                    ],
                )
            )
            pool = Pool(cluster, jumpstarter, name, reconciler, history)
            yield pool
            reconciler.check_alive()
            jumpstarter.check_alive()
    finally:
        history.stop()


@contextlib.contextmanager
def fresh_pool(
    cluster: Any, jumpstarters: JumpstarterSupply, workdir: Path, **pool_args: Any
) -> Iterator[Pool]:
    """`running_pool` in a namespace of its own, served by its own Jumpstarter, deleted
    afterwards."""
    with jumpstarters.take() as jumpstarter:
        try:
            with running_pool(cluster, jumpstarter, workdir, **pool_args) as running:
                yield running
        finally:
            cluster.kubectl(
                "delete", "namespace", jumpstarter.namespace, "--wait=false", check=False
            )


def container_pid(pod: Obj, container: str) -> int:
    """The host pid of `container`'s first process in `pod`, found through its cgroup
    (the kubelet's cgroupfs layout names the Pod's uid and the container's id)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    found = next(s for s in statuses if s["name"] == container)
    container_id = found["containerID"].split("://", 1)[1]
    pod_dir = "pod" + pod["metadata"]["uid"]
    parents: dict[int, int] = {}
    started: dict[int, int] = {}  # clock ticks after boot
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if pod_dir in cgroups and container_id in cgroups:
            fields = stat.rsplit(")", 1)[1].split()
            parents[int(entry.name)] = int(fields[1])
            started[int(entry.name)] = int(fields[19])
    # The container's first process: its parent is outside the container. So is that of a
    # process `kubectl exec` or an exec probe (every 2 s) started meanwhile: the first
    # process is the oldest of them.
    tops = [pid for pid, parent in parents.items() if parent not in parents]
    if not tops:
        raise AssertionError(f"{container} of Pod {pod['metadata']['name']}: processes {parents}")
    return min(tops, key=lambda pid: (started[pid], pid))


def kill_container(pod: Obj, container: str, sig: signal.Signals) -> None:
    """Send `sig` to the container's main process from the host, as the kernel's OOM
    killer or an operator would: its exit is then what the kubelet reports."""
    os.kill(container_pid(pod, container), sig)
