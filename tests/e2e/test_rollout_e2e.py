"""Rollouts against a real kube-apiserver: a changed template reaches a pool of three with
one instance leased, one replacement at a time, the leased one untouched until its
release; a pause holds it; a new revision whose Pods fail removes no healthy instance.

Jumpstarter's released 0.9.0 controller serves the namespace: it issues the credentials,
registers each instance's exporter (Jumpstarter 0.9.0's own `jmp run`, one per live
instance Pod: `tests.exporters`), and assigns and ends the lease (`jmp create lease`
pinned to one instance, `jmp delete lease`). No kubelet runs here: the test plays it (Pods
set Running, or ended by `bench.storm.FailingKubelet`, under which no container starts).
Figures are printed, not asserted as timings; the bounds only stop a runaway.
"""

from __future__ import annotations

import base64
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.storm import FailingKubelet, SecretCollector
from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from pool.model.keys import REVISION, ROLLOUT
from tests.e2e.objects import assigned_exporter, get_json, rotate_credential, wait_for
from tests.e2e.test_replacement_e2e import (
    condition,
    instances,
    make_pool,
    patch,
    pods_of,
)
from tests.exporters import ExporterProcesses

CEILING, WARM = 4, 2
SELECTOR = "pool=pool"  # the template's labels (make_pool)


def available(exporter: dict[str, Any]) -> bool:
    status = exporter.get("status") or {}
    registered = any(
        c["type"] == "Registered" and c["status"] == "True" for c in status.get("conditions") or []
    )
    return registered and status.get("exporterStatus") == "Available" and not status.get("leaseRef")


@dataclass
class Kubelet:
    """Plays the kubelet for instances whose Pods run: a Pod (not ended by a failing
    kubelet) is set Running (its `jmp run` is `tests.exporters`'). Notes the most owned
    instances and the fewest available ones seen."""

    plane: ControlPlane
    ns: str
    failing: threading.Event = field(default_factory=threading.Event)
    most_owned: int = 0
    fewest_available: int = 1 << 30
    seen: list[str] = field(default_factory=list)  # uids in order of creation

    def look(self) -> None:
        every = get_json(self.plane, "exporters", "-n", self.ns)["items"]
        self.most_owned = max(self.most_owned, len(every))
        live = instances(self.plane, self.ns)
        self.fewest_available = min(self.fewest_available, sum(1 for e in live if available(e)))
        for exporter in live:
            uid = exporter["metadata"]["uid"]
            if uid not in self.seen:
                self.seen.append(uid)
            if self.failing.is_set():
                continue
            pods = pods_of(self.plane, self.ns, uid)
            if pods and (pods[0].get("status") or {}).get("phase", "Pending") == "Pending":
                patch(self.plane, self.ns, "pod", pods[0]["metadata"]["name"],
                      {"status": {"phase": "Running"}}, "--subresource=status")  # fmt: skip

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(0.3):
            self.look()


def uids(plane: ControlPlane, ns: str) -> dict[str, str]:
    return {e["metadata"]["uid"]: e["metadata"]["name"] for e in instances(plane, ns)}


def revisions(plane: ControlPlane, ns: str) -> Counter[str]:
    return Counter(e["metadata"]["annotations"].get(REVISION, "") for e in instances(plane, ns))


def edit_template(plane: ControlPlane, ns: str, value: str) -> None:
    """A new annotation and a driver more in the template: a new revision."""
    power = {"name": f"power{value}", "type": "jumpstarter_driver_power.driver.MockPower"}
    template = {"metadata": {"annotations": {"e2e/revision": value}}, "spec": {"drivers": [power]}}
    patch(plane, ns, "exporterset", "pool", {"spec": {"template": template}})


def config_of(plane: ControlPlane, ns: str, exporter: str) -> dict[str, Any]:
    secret = get_json(plane, "secret", f"exporter-config-{exporter}", "-n", ns)
    loaded: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"]["config.yaml"]))
    return loaded


def full_pool(
    plane: ControlPlane, ns: str, reconcile: Callable[[], Path], stop: threading.Event, **spec: Any
) -> tuple[Kubelet, Path]:
    """A pool of 3 (ceiling CEILING, warm buffer WARM), every instance available, the
    kubelet played until `stop`."""
    kubelet = Kubelet(plane, ns)
    make_pool(plane, ns, minReplicas=3, maxReplicas=CEILING, minAvailableReplicas=WARM, **spec)
    log = reconcile()
    wait_for("3 instances", lambda: len(instances(plane, ns)) == 3)
    threading.Thread(target=kubelet.run, args=(stop,), daemon=True).start()
    wait_for("3 available", lambda: sum(map(available, instances(plane, ns))) == 3)
    return kubelet, log


def events(plane: ControlPlane, ns: str) -> Counter[str]:
    items = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
    return Counter(str(e.get("reason")) for e in items)


def test_a_template_change_rolls_out_one_at_a_time_around_a_lease(
    control_plane: ControlPlane,
    jumpstarter: Jumpstarter,
    reconcile: Callable[[], Path],
    exporters: ExporterProcesses,
) -> None:
    plane, stop, ns = control_plane, threading.Event(), jumpstarter.namespace
    kubelet, _ = full_pool(plane, ns, reconcile, stop, recycleStrategy="InPlaceReuse")
    try:
        before = uids(plane, ns)
        leased_uid, leased = sorted(before.items(), key=lambda item: item[1])[0]
        jumpstarter.request_lease(SELECTOR, "lab-1", exporter=leased)
        wait_for("lab-1 assigned", lambda: assigned_exporter(plane, ns, "lab-1") == leased)
        wait_for("the lease seen", lambda: get_json(plane, "exporterset", "pool", "-n", ns)
                 .get("status", {}).get("leasedReplicas") == 1)  # fmt: skip
        idle = set(before) - {leased_uid}
        old = set(revisions(plane, ns))
        kubelet.most_owned, kubelet.fewest_available = 0, 1 << 30
        edited = time.monotonic()
        edit_template(plane, ns, "2")

        first = wait_for("one idle instance replaced", lambda: idle - set(uids(plane, ns)))
        (second,) = idle - first
        patch(plane, ns, "exporterset", "pool", {"metadata": {"annotations": {ROLLOUT: "paused"}}})
        wait_for(
            "RolloutPaused",
            lambda: condition(plane, ns, "Progressing")["reason"] == "RolloutPaused",
        )
        time.sleep(4)  # many passes while paused
        assert second in uids(plane, ns), "paused, yet the second idle instance went"
        patch(plane, ns, "exporterset", "pool", {"metadata": {"annotations": {ROLLOUT: None}}})
        wait_for("the second idle instance replaced", lambda: second not in uids(plane, ns), 120)
        idle_done = time.monotonic() - edited

        waiting = wait_for("only the leased one outdated", lambda: (
            condition(plane, ns, "Progressing")["message"]
            if sum(n for r, n in revisions(plane, ns).items() if r in old) == 1 else ""
        ))  # fmt: skip
        assert waiting.startswith("2 of 3 instance(s) on the current revision"), waiting
        assert uids(plane, ns)[leased_uid] == leased, "the leased instance was touched"
        # Its config stays what its process started with; a rotated token still reaches it.
        started_with = config_of(plane, ns, leased)
        assert "power2" not in started_with["export"]
        token = rotate_credential(plane, ns, leased)
        wait_for("the token rotated", lambda: config_of(plane, ns, leased)["token"] == token)
        assert config_of(plane, ns, leased) == {**started_with, "token": token}
        assert leased_uid in uids(plane, ns)
        jumpstarter.release_lease("lab-1")  # its lease ends: now it is replaced
        wait_for("the released instance replaced", lambda: leased_uid not in uids(plane, ns), 120)
        wait_for("RolloutComplete", lambda: events(plane, ns)["RolloutComplete"])
        assert not set(revisions(plane, ns)) & old
        reasons = events(plane, ns)
        print(
            f"\nrollout of 3 (1 leased): idle ones replaced {idle_done:.1f} s after the edit "
            f"(a pause of 4 s included); most owned {kubelet.most_owned} (ceiling {CEILING}), "
            f"fewest available {kubelet.fewest_available} (warm buffer {WARM}, one leased); "
            f"Events {dict(reasons)}"
        )
        assert reasons["RolloutStarted"] == 1 and reasons["RolloutComplete"] == 1
        assert kubelet.most_owned <= CEILING
        assert kubelet.fewest_available >= WARM
        assert len(uids(plane, ns)) == 3
    finally:
        stop.set()


def test_a_broken_new_image_removes_no_healthy_instance(
    control_plane: ControlPlane,
    ns: str,
    reconcile: Callable[[], Path],
    exporters: ExporterProcesses,
) -> None:
    plane, stop = control_plane, threading.Event()
    kubelet, log = full_pool(plane, ns, reconcile, stop)
    try:
        healthy = set(uids(plane, ns))
        exporters.pause()  # the broken image's containers never start
        kubelet.failing.set()
        failing = FailingKubelet(plane, ns)  # every new Pod ends before registering
        failing.start(stop)
        SecretCollector(plane, ns).start(stop)
        broken = {"exporter": {"image": "quay.io/jumpstarter-dev/jumpstarter:no-such-tag"}}
        patch(plane, ns, "exporterset", "pool", {"spec": {"images": broken}})

        def stopped() -> str:
            message = str(condition(plane, ns, "Degraded").get("message", ""))
            return message if message.endswith("the rollout is stopped") else ""

        # Bounded against a runaway only: the new Pods fail one per backoff step (5 s, 10 s,
        # 20 s, ...), slower on a loaded machine.
        message = wait_for("Degraded saying the rollout stopped", stopped, 180)
        time.sleep(15)  # backoff steps: 5 s, 10 s
        assert healthy <= set(uids(plane, ns)), log.read_text()
        print(f"\nbroken image: {failing.ended} Pods ended; Degraded: {message}")

        failing.failing.clear()  # fixed: a working image
        kubelet.failing.clear()
        exporters.resume()
        fixed = {"exporter": {"image": "quay.io/jumpstarter-dev/jumpstarter:fixed"}}
        patch(plane, ns, "exporterset", "pool", {"spec": {"images": fixed}})
        wait_for("a healthy instance replaced", lambda: healthy - set(uids(plane, ns)), 120)
    finally:
        stop.set()
