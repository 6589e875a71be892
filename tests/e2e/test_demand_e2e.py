"""Demand against a real kube-apiserver: a Lease booked for later counts only from its
beginTime less the pool's boot time, and a pool with `warm-buffer: auto` raises its buffer
on a burst of Leases, keeps what it learned across a restart of the reconciler, and falls
back once arrivals stop.

Jumpstarter's released 0.9.0 controller serves each test's namespace: it issues the
credentials, the Leases are its client's (`jmp create lease`, released with `jmp delete
lease`), and each instance's exporter is its `jmp run` (`tests.exporters`). Boot estimates
and demand windows are short annotations so that the moments fall within seconds. Waits
are bounded polls, not timing assertions.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from api.warmbuffer import BOOT_ESTIMATE, DEMAND_WINDOW, WARM_BUFFER
from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from pool.model.demand import DemandMemory, decode_demand
from pool.model.keys import DEMAND
from pool.model.reasons import WARM_BUFFER_CHANGED
from pool.model.timefmt import format_time, parse_time
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    pool_memory,
    virtual_target_class,
    wait_for,
)
from tests.e2e.test_reconciler_e2e import Reconciler, names
from tests.exporters import ExporterProcesses


@pytest.fixture
def plane_ns(control_plane: ControlPlane, ns: str) -> tuple[ControlPlane, str]:
    return control_plane, ns


@pytest.fixture
def start(plane_ns: tuple[ControlPlane, str], tmp_path: Path) -> Iterator[Callable[[], Reconciler]]:
    plane, ns = plane_ns
    started: list[Reconciler] = []

    def run() -> Reconciler:
        started.append(Reconciler(plane, ns, tmp_path / f"reconciler-{len(started)}.log"))
        return started[-1]

    yield run
    for reconciler in started:
        reconciler.stop(signal.SIGKILL)


def make_pool(plane: ControlPlane, ns: str, annotations: dict[str, str], **spec: Any) -> None:
    apply(plane, virtual_target_class("qemu", ns, parameters={"resources": {"cpu": 1}}))
    body = exporter_set("pool", ns, class_name="qemu", labels={"board": "pool"},
                        with_template=True, **spec)  # fmt: skip
    body["metadata"]["annotations"] = annotations
    apply(plane, body)


def planned(plane: ControlPlane, ns: str) -> dict[str, Any]:
    kubeconfig = f"--kubeconfig={plane.kubeconfig}"
    result = subprocess.run(
        [sys.executable, "-m", "virtualtarget.cli", "plan", kubeconfig, "-n", ns, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (entry,) = json.loads(result.stdout)["sets"]
    assert isinstance(entry, dict)
    return entry


def available_message(plane: ControlPlane, ns: str) -> str:
    status = get_json(plane, "exporterset", "pool", "-n", ns).get("status", {})
    found = [c for c in status.get("conditions", []) if c["type"] == "Available"]
    return str(found[0]["message"]) if found else ""


def test_a_scheduled_lease_creates_nothing_until_its_begin_less_the_boot_time(
    plane_ns: tuple[ControlPlane, str], jumpstarter: Jumpstarter, start: Callable[[], Reconciler]
) -> None:
    plane, ns = plane_ns
    # boot estimate 9m15s: a Lease beginning in 10 minutes counts 45 s from now, time
    # enough for the plan below on a loaded machine
    make_pool(plane, ns, {BOOT_ESTIMATE: "9m15s"}, minAvailableReplicas=0, maxReplicas=2)
    jumpstarter.client()  # its Client made and its library loaded before the clock starts
    begin = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    counts_at = begin - timedelta(minutes=9, seconds=15)
    jumpstarter.request_lease("board=pool", "later", begin=begin)

    entry = planned(plane, ns)
    leases = get_json(plane, "leases.jumpstarter.dev", "-n", ns)["items"]
    assert entry["pendingLeases"] == 0 and entry["desired"] == 0, (entry, leases)
    waiting = [s for s in entry["steps"] if "scheduled lease later" in s["reason"]]
    assert waiting and waiting[0]["at"] == format_time(counts_at), entry["steps"]

    reconciler = start()
    (made,) = wait_for("an instance for the scheduled lease", lambda: names(plane, ns), 90)
    # Its Pod is made when it becomes an instance (the pool's standby, an Exporter made
    # earlier without a Pod, may be the one promoted).
    (pod,) = wait_for(
        "its Pod",
        lambda: [
            p for p in get_json(plane, "pods", "-n", ns)["items"] if p["metadata"]["name"] == made
        ],
    )
    created = parse_time(pod["metadata"]["creationTimestamp"])
    assert created >= counts_at, (created, counts_at)  # nothing before its moment
    assert planned(plane, ns)["pendingLeases"] == 1
    assert reconciler.stop() == 0, reconciler.text()


def test_an_auto_pool_learns_a_burst_keeps_it_across_a_restart_and_falls_back(
    plane_ns: tuple[ControlPlane, str],
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    start: Callable[[], Reconciler],
) -> None:
    plane, ns = plane_ns
    # Six arrivals, a 20 s window, 30 s boots: the first plan sizes a buffer of 2 or more
    # if it comes within about 65 s of the burst (a reconciler's start on a loaded machine
    # has taken 40), the buffer stays at 1 or more until about 90 s after it (the restart's
    # plan comes at 20-40 s), then falls to 0 (the instances' own boots, ~10 s, count).
    annotations = {WARM_BUFFER: "auto", BOOT_ESTIMATE: "30s", DEMAND_WINDOW: "20s"}
    make_pool(plane, ns, annotations, minAvailableReplicas=0, maxReplicas=8,
              scaleDownCooldown="2s")  # fmt: skip
    # A burst of six Leases, all in flight at once, released at once (the controller ends
    # them) before the reconciler starts: arrivals, not pending demand.
    burst = [f"burst-{i}" for i in range(6)]
    jumpstarter.request_leases([("board=pool", name) for name in burst])
    for name in burst:
        jumpstarter.release_lease(name)

    first = start()
    wait_for("the buffer rises", lambda: len(names(plane, ns)) >= 2)

    def learned() -> DemandMemory | None:
        memory = decode_demand((pool_memory(plane, ns, "pool") or {}).get(DEMAND))
        return memory if memory and memory.rate > 0 else None  # the first pass wrote rate 0

    # What the memory holds is written after the rise, when the rate has decayed: 1 or more.
    memory = wait_for("the learned demand in the memory Lease", learned)
    assert memory.buffer >= 1, memory
    assert "from demand" in wait_for("the message", lambda: available_message(plane, ns))
    events = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
    assert any(e.get("reason") == WARM_BUFFER_CHANGED for e in events), events

    # The Leases go and the reconciler restarts: the rate is what the memory kept.
    plane.kubectl("delete", "lease.jumpstarter.dev", "--all", "-n", ns)
    assert first.stop(signal.SIGKILL) != 0
    demand = planned(plane, ns)["demand"]
    assert demand is not None and demand["warmBuffer"] >= 1 and demand["leasesPerMinute"] > 0
    start()
    # Arrivals stopped: the rate decays, the buffer falls, the surplus goes after cooldown.
    wait_for("the buffer falls back", lambda: not names(plane, ns), timeout=240)
    assert "warm buffer 0 from demand" in available_message(plane, ns)
