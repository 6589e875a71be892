"""Replace storm: Exporters created per minute for a pool whose exporter cannot start.

On a real node, Jumpstarter 0.9.0's `jmp run` exits 0 after five quick failures of its
serving process (an unreachable endpoint, a missing driver package), and the Pod ends
Succeeded without the exporter ever registering. This benchmark plays that on a loopback
kube-apiserver: a failing kubelet (`FailingKubelet`) ends every new instance Pod of the
namespace as Succeeded, its `exporter` container terminated with exit code 0 and jmp's
last words as the termination message; the development stand-in issues credentials as
Jumpstarter's controller would, and `SecretCollector` deletes the Secrets of removed
Exporters as the garbage collector would. A watch counts the Exporters created (distinct
uids) over `WINDOW_S`, and the Events the pool got are counted at its end, for each pool
shape of `SHAPES`: one with room under its ceiling, and two at their ceiling
(minReplicas = maxReplicas), where a failed instance holds a slot until its delay is over.

Each reconciler tree runs as its own `virtualtarget reconcile` process in a namespace of
its own per shape, one after the other on one control plane: this tree, and the tree
named by VIRTUALTARGET_BENCH_BEFORE (main's work tree, say) when set.

    VIRTUALTARGET_BIN_DIR=... VIRTUALTARGET_BENCH_BEFORE=/path/to/main python -m bench storm
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.controlplane import REPO_ROOT, ControlPlane, running_control_plane
from harness.stack import reconciler_args
from harness.standin import CredentialStandIn
from pool.model.access import EXPORTERS, PODS
from pool.model.keys import GROUP
from reconciler.runtime.cache import Informer
from reconciler.runtime.kube import Kube
from tests.e2e.objects import install_lease_crd, instance_step

WINDOW_S = 60.0
# Condition Events a broken pool has no reason to write again and again.
FLIPS = ("ExporterSetRecovered", "ScalingLimited", "ScalingUnlimited")


@dataclass(frozen=True)
class Shape:
    """A pool's bounds: minReplicas, maxReplicas (0: no ceiling), minAvailableReplicas."""

    name: str
    min_replicas: int
    max_replicas: int
    warm: int


SHAPES = (
    Shape("roomy (min 2, no max, warm 2)", 2, 0, 2),
    Shape("ceiling (min = max = 1, warm 1)", 1, 1, 1),
    Shape("ceiling (min = max = 4, warm 4)", 4, 4, 4),
)
# What 0.9.0's `jmp run` prints before it exits 0 (`jumpstarter_cli.run`).
LAST_WORDS = (
    "Exporter child process failed 5 times within 60s each. "
    "Exiting to allow container/service restart."
)


def ended_status(code: int, message: str) -> dict[str, Any]:
    """A Pod's status once its `exporter` container exited with `code`, as a kubelet
    writes it (Succeeded on 0, else Failed)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    terminated = {"exitCode": code, "startedAt": now, "finishedAt": now, "message": message}
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": "exporter",
                "image": "exporter",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }


@dataclass
class FailingKubelet:
    """Ends every new Pod of `namespace` as a failed `jmp run` would (exit 0, never
    registered), until `failing` is cleared; with `container_status` False the Pod gets
    its phase only, Succeeded, and no container status."""

    plane: ControlPlane
    namespace: str
    failing: threading.Event = field(default_factory=threading.Event)
    ended: int = 0
    container_status: bool = True

    def __post_init__(self) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(self.plane.api_client())
        self.failing.set()
        self.informer = Informer(Kube(self.plane.api_client()), PODS, self.namespace)
        self.informer.add_handler(self._on_pod)

    def _on_pod(self, _kind: str, pod: dict[str, Any], _old: dict[str, Any] | None) -> None:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if not self.failing.is_set() or meta.get("deletionTimestamp"):
            return
        if (status.get("phase") or "Pending") != "Pending":
            return
        ended = ended_status(0, LAST_WORDS) if self.container_status else {"phase": "Succeeded"}
        body = {"status": ended}
        with contextlib.suppress(Exception):  # gone meanwhile: nothing to end
            self.core.patch_namespaced_pod_status(meta["name"], self.namespace, body)
            self.ended += 1

    def start(self, stop: threading.Event) -> None:
        threading.Thread(target=self.informer.run, args=(stop,), daemon=True).start()


@dataclass
class SecretCollector:
    """The garbage collector's part for Secrets: those whose controller Exporter is gone
    are deleted (a loopback control plane runs no controllers). With `cascade`, all of its
    part for a pool: Pods too, and first the Exporters whose ExporterSet is gone."""

    plane: ControlPlane
    namespace: str
    cascade: bool = False

    def run(self, stop: threading.Event) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.plane.api_client())
        custom = client.CustomObjectsApi(self.plane.api_client())

        def exporters() -> list[dict[str, Any]]:
            found: Any = custom.list_namespaced_custom_object(
                "jumpstarter.dev", "v1alpha1", self.namespace, "exporters"
            )
            return list(found["items"])

        def core_items(listing: Any) -> list[dict[str, Any]]:
            return list(json.loads(listing(self.namespace, _preload_content=False).data)["items"])

        def orphan(item: dict[str, Any], kind: str, live: set[str]) -> bool:
            """Every owner of `kind` is gone (and it has one)."""
            refs = item["metadata"].get("ownerReferences") or []
            uids = {r["uid"] for r in refs if r["kind"] == kind}
            return bool(uids) and not uids & live

        while not stop.wait(0.3):
            with contextlib.suppress(Exception):
                found = exporters()
                if self.cascade:
                    sets: Any = custom.list_namespaced_custom_object(
                        GROUP, "v1alpha1", self.namespace, "exportersets"
                    )
                    kept = {s["metadata"]["uid"] for s in sets["items"]}
                    for exporter in found:
                        if exporter["metadata"].get("deletionTimestamp"):
                            continue
                        if orphan(exporter, "ExporterSet", kept):
                            name = exporter["metadata"]["name"]
                            custom.delete_namespaced_custom_object(
                                "jumpstarter.dev", "v1alpha1", self.namespace, "exporters", name
                            )
                live = {e["metadata"]["uid"] for e in found}
                for secret in core_items(core.list_namespaced_secret):
                    if orphan(secret, "Exporter", live):
                        core.delete_namespaced_secret(secret["metadata"]["name"], self.namespace)
                for pod in core_items(core.list_namespaced_pod) if self.cascade else []:
                    if orphan(pod, "Exporter", live):
                        core.delete_namespaced_pod(pod["metadata"]["name"], self.namespace)

    def start(self, stop: threading.Event) -> None:
        threading.Thread(target=self.run, args=(stop,), daemon=True).start()


@dataclass
class CreationCounter:
    """Every Exporter of `namespace` ever seen, by uid, with the local time it was first
    seen; and each instance (an Exporter seen without the standby label: created as one,
    or a standby promoted) with the backoff step it carried then."""

    plane: ControlPlane
    namespace: str
    seen: dict[str, float] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.informer = Informer(Kube(self.plane.api_client()), EXPORTERS, self.namespace)
        self.informer.add_handler(self._on_exporter)

    def _on_exporter(self, _kind: str, new: dict[str, Any], _old: dict[str, Any] | None) -> None:
        uid = (new.get("metadata") or {}).get("uid")
        if uid:
            self.seen.setdefault(uid, time.monotonic())
            if (step := instance_step(new)) is not None:
                self.steps.setdefault(uid, step)

    def start(self, stop: threading.Event) -> None:
        threading.Thread(target=self.informer.run, args=(stop,), daemon=True).start()
        self.informer.synced.wait(30)

    def since(self, start: float) -> int:
        return sum(1 for at in self.seen.values() if at >= start)


def broken_pool(plane: ControlPlane, namespace: str, shape: Shape, name: str = "pool") -> None:
    """A class and a set of that shape; its instances' Pods are ended by `FailingKubelet`."""
    group = "virtualtarget.jumpstarter.dev/v1alpha1"
    objects = [
        {
            "apiVersion": group,
            "kind": "VirtualTargetClass",
            "metadata": {"name": "qemu", "namespace": namespace},
            "spec": {"provisioner": "qemu.jumpstarter.dev"},
        },
        {
            "apiVersion": group,
            "kind": "ExporterSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "virtualTargetClassName": "qemu",
                "selector": {"matchLabels": {"board": name}},
                "template": {"metadata": {"labels": {"board": name}}},
                "minReplicas": shape.min_replicas,
                "maxReplicas": shape.max_replicas,
                "minAvailableReplicas": shape.warm,
            },
        },
    ]
    items = {"apiVersion": "v1", "kind": "List", "items": objects}
    plane.kubectl("apply", "-f", "-", input=json.dumps(items))


@contextlib.contextmanager
def reconciler(plane: ControlPlane, tree: Path, namespace: str, log: Path) -> Iterator[None]:
    """`virtualtarget reconcile` from the source `tree`, for one namespace."""
    args = reconciler_args(plane.kubeconfig)
    args += ["--namespace", namespace, "--no-leader-election"]
    popen = subprocess.Popen(
        [sys.executable, "-m", "virtualtarget.cli", *args],
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        env={**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield
    finally:
        popen.terminate()
        try:
            popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()


@dataclass
class Storm:
    tree: str
    created: int
    window: float
    pods_ended: int
    degraded: dict[str, Any]
    pods_failed: int
    events: dict[str, int]  # Events written about the pool, by reason

    @property
    def per_minute(self) -> float:
        return self.created * 60 / self.window


def measure(
    plane: ControlPlane, tree: Path, namespace: str, shape: Shape, window: float = WINDOW_S
) -> Storm:
    plane.kubectl("create", "namespace", namespace)
    stop = threading.Event()
    kubelet, counter = FailingKubelet(plane, namespace), CreationCounter(plane, namespace)
    standin = CredentialStandIn(plane.api_client(), namespace=namespace)
    with tempfile.TemporaryDirectory() as work:
        try:
            kubelet.start(stop)
            counter.start(stop)
            SecretCollector(plane, namespace).start(stop)
            threading.Thread(target=standin.run, args=(stop,), daemon=True).start()
            with reconciler(plane, tree, namespace, Path(work) / "reconciler.log"):
                broken_pool(plane, namespace, shape)
                start = time.monotonic()
                time.sleep(window)
                created = counter.since(start - 1)
        finally:
            stop.set()
    found = json.loads(
        plane.kubectl("get", "exporterset", "pool", "-n", namespace, "-o", "json").stdout
    )
    status = found.get("status") or {}
    degraded = next((c for c in status.get("conditions") or [] if c.get("type") == "Degraded"), {})
    events = json.loads(plane.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    reasons = Counter(
        str(e.get("reason"))
        for e in events["items"]
        if e["involvedObject"].get("kind") == "ExporterSet"
    )
    return Storm(
        str(tree),
        created,
        window,
        kubelet.ended,
        degraded,
        int(status.get("podsFailed", 0)),
        dict(reasons),
    )


def main() -> str:
    trees = [("after (this tree)", REPO_ROOT)]
    before = os.environ.get("VIRTUALTARGET_BENCH_BEFORE")
    if before:
        trees.insert(0, ("before", Path(before)))
    rows = []
    with running_control_plane() as plane:
        install_lease_crd(plane)  # as in a cluster with Jumpstarter: Leases are served
        for i, shape in enumerate(SHAPES):
            for t, (label, tree) in enumerate(trees):
                storm = measure(plane, tree, f"storm-{i}-{t}", shape)
                events = storm.events
                flips = sum(events.get(reason, 0) for reason in FLIPS)
                rows.append(
                    f"| {shape.name} | {label} | {storm.created} | {storm.per_minute:.1f} | "
                    f"{storm.pods_ended} | {sum(events.values())} | "
                    f"{events.get('BackOff', 0)} | {flips} | "
                    f"{storm.degraded.get('status', '')}/{storm.degraded.get('reason', '')} | "
                    f"{storm.pods_failed} |"
                )
    header = [
        f"| pool | reconciler | Exporters created in {WINDOW_S:.0f} s | per minute "
        "| Pods ended failing | Events | BackOff Events | Recovered, Limited, Unlimited "
        "| Degraded at the end | podsFailed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    return "\n".join(["## storm (`python -m bench storm`)", "", *header, *rows])
