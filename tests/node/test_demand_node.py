"""A burst of Leases served by instances whose Pods run: a pool with `warm-buffer: auto`
against a pool with a fixed `minAvailableReplicas` of the same cost.

Each Lease is a `jumpstarter.dev` Lease of a Client made by the release's `jmp admin create
client`, served by Jumpstarter's released 0.9.0 controller (the pool's namespace is its):
it is assigned to an Exporter that registered from inside its Pod, held a few seconds,
then released (`spec.release`, as the controller's DeleteLease writes it), and its
instance is recycled (ExitAndReplace). The auto pool starts with nothing warm (its floor
is 0) and learns the burst as it comes; its boot estimate and demand window are short
annotations, so the moments fall within seconds.

"The same cost": the fixed buffer is auto's mean idle instances over the burst (idle
instance-seconds / the burst's span, rounded to the nearest whole instance), warm before
its burst as a fixed buffer always is. Idle means owned and not serving a lease, booting
included (the node spends on it the same); it is counted from the first Lease to the last
release, so auto gets no credit for the quiet before and after, when it keeps nothing.

A lease's wait is its `status.beginTime` less its `metadata.creationTimestamp`, as the
lease controller writes them (whole seconds). The test asserts behaviour only (every
Lease served, auto's buffer above its floor during the burst and said to come from
demand, no instance deleted while it served a Lease) and prints the figures.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from api.warmbuffer import BOOT_ESTIMATE, DEMAND_WINDOW, WARM_BUFFER
from harness.jumpstarter import JumpstarterSupply
from pool.model.timefmt import parse_time
from tests.node.pool_support import Pool, fresh_pool
from tests.node.support import record_figure

pytestmark = pytest.mark.timeout(900)


Obj = dict[str, Any]
GROUP, CLIENT = "jumpstarter.dev", "burst"
CEILING = 4  # maxReplicas of both pools: four instance Pods on the node's two cores
BURST, GAP_S, HOLD_S = 8, 2.0, 5.0  # Leases, seconds between two, seconds each is held
WINDOW_S = 30.0  # the auto pool's demand window: the time constant of its rate's decay
AUTO = {WARM_BUFFER: "auto", BOOT_ESTIMATE: "10s", DEMAND_WINDOW: f"{WINDOW_S:g}s"}
BURST_TIMEOUT_S = 240.0
_IN_FORCE = re.compile(r"warm buffer (\d+) from demand")
_RATE = re.compile(r"from demand: ([\d.]+) leases/min")


@dataclass
class Burst:
    """What one burst showed: each Lease as last read, and the pool over its span."""

    leases: dict[str, Obj] = field(default_factory=dict)
    released: dict[str, float] = field(default_factory=dict)  # time.monotonic()
    idle_s: float = 0.0  # instance-seconds owned and not serving a Lease
    span_s: float = 0.0  # first Lease created -> last one released
    most_in_force: int = 0  # the highest buffer the set's conditions said was in force
    demand_messages: set[str] = field(default_factory=set)
    in_force: list[tuple[float, int]] = field(default_factory=list)  # (s into it, buffer)
    last_message: str = ""

    def waits(self) -> list[float]:
        """Creation -> assignment of every Lease, in seconds."""
        return [
            (
                parse_time(lease["status"]["beginTime"])
                - parse_time(lease["metadata"]["creationTimestamp"])
            ).total_seconds()
            for lease in self.leases.values()
        ]

    def summary(self) -> str:
        waits = sorted(self.waits())
        p95 = waits[max(0, -(-95 * len(waits) // 100) - 1)]  # nearest rank
        return (
            f"wait p50 {statistics.median(waits):.1f} s, p95 {p95:.0f} s, max {waits[-1]:.0f} s;"
            f" idle {self.idle_s:.0f} instance-s over {self.span_s:.0f} s"
        )


def _lease(pool: Pool, name: str) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": pool.namespace},
        "spec": {
            "clientRef": {"name": CLIENT},
            "selector": {"matchLabels": {"pool": pool.name}},
            "duration": "10m",
        },
    }


class _Driver:
    """Plays the burst: creates the Leases on time, releases each `HOLD_S` after it was
    seen assigned, and samples the set's status (idle instances, the buffer in force)."""

    def __init__(self, pool: Pool) -> None:
        from kubernetes import client

        self.pool, self.seen = pool, Burst()
        self.custom = client.CustomObjectsApi(pool.cluster.plane.api_client())
        pool.jumpstarter.client_config(CLIENT)  # the Client the Leases are of
        self.created: list[str] = []
        self.assigned: dict[str, float] = {}

    def run(self) -> Burst:
        started = last = time.monotonic()
        while len(self.seen.released) < BURST:
            now = time.monotonic()
            if now - started > BURST_TIMEOUT_S:
                raise AssertionError(
                    f"the burst not served in {BURST_TIMEOUT_S:.0f} s: released "
                    f"{sorted(self.seen.released)}\n{self.pool.describe()}"
                )
            while len(self.created) < BURST and now >= started + len(self.created) * GAP_S:
                self._create(f"burst-{len(self.created)}")
            self._read_leases(now)
            self._release_held(now)
            self._sample(now - started, now - last)
            last = now
            time.sleep(0.25)
        self.seen.span_s = max(self.seen.released.values()) - started
        return self.seen

    def _create(self, name: str) -> None:
        body = _lease(self.pool, name)
        self.custom.create_namespaced_custom_object(
            GROUP, "v1alpha1", self.pool.namespace, "leases", body
        )
        self.created.append(name)

    def _read_leases(self, now: float) -> None:
        listed = self.custom.list_namespaced_custom_object(
            GROUP, "v1alpha1", self.pool.namespace, "leases"
        )
        for lease in listed["items"]:  # an ended Lease goes with its recycled Exporter
            name = lease["metadata"]["name"]
            if ((lease.get("status") or {}).get("exporterRef") or {}).get("name"):
                self.seen.leases[name] = lease
                self.assigned.setdefault(name, now)

    def _release_held(self, now: float) -> None:
        for name, at in self.assigned.items():
            if name not in self.seen.released and now - at >= HOLD_S:
                self.seen.released[name] = time.monotonic()
                try:
                    self.custom.patch_namespaced_custom_object(
                        GROUP, "v1alpha1", self.pool.namespace, "leases", name,
                        {"spec": {"release": True}},
                    )  # fmt: skip
                except ApiException as gone:  # its Exporter went while serving it (owner)
                    exporter = _exporter_of(self.seen.leases[name])
                    raise AssertionError(
                        f"Lease {name} was lost before its release with Exporter {exporter} "
                        f"({gone.status})\n{self.pool.describe()}"
                    ) from gone

    def _sample(self, into: float, elapsed: float) -> None:
        status = self.pool.status()
        idle = int(status.get("replicas", 0)) - int(status.get("leasedReplicas", 0))
        self.seen.idle_s += max(0, idle) * elapsed
        for condition in status.get("conditions") or []:
            found = _IN_FORCE.search(condition.get("message") or "")
            if found:
                buffer, seen = int(found.group(1)), self.seen
                seen.demand_messages.add(condition["message"])
                seen.last_message = condition["message"]
                seen.most_in_force = max(seen.most_in_force, buffer)
                if not seen.in_force or seen.in_force[-1][1] != buffer:
                    seen.in_force.append((into, buffer))


def _exporter_of(lease: Obj) -> str:
    return str(lease["status"]["exporterRef"]["name"])


def _deleted_while_serving(pool: Pool, seen: Burst) -> list[str]:
    """Lease -> exporter pairs whose Exporter was deleted before its Lease was released
    (from the namespace's watch: a deletionTimestamp or a DELETED event)."""
    wrong = []
    for name, lease in seen.leases.items():
        exporter = _exporter_of(lease)
        going = [
            event.at
            for event in list(pool.history.exporters)
            if event.name == exporter
            and (event.kind == "DELETED" or event.obj["metadata"].get("deletionTimestamp"))
        ]
        if going and min(going) < seen.released[name]:
            wrong.append(f"{name} -> {exporter}")
    return wrong


@pytest.fixture
def pools(node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Any]:
    """A fresh pool (its own namespace, served by its own Jumpstarter) each call."""

    def fresh(prefix: str) -> Any:
        workdir = tmp_path / prefix
        workdir.mkdir()
        return fresh_pool(node_cluster, jumpstarters, workdir)

    yield fresh


def _learned_rate(seen: Burst) -> float:
    found = _RATE.search(seen.last_message)
    assert found, seen.last_message
    return float(found.group(1))


def _every_arrival_learned(seen: Burst) -> float:
    """The least rate (leases/min) the pool states at the burst's end if it learned every
    arrival: each of them, decayed over the whole span (and the second creationTimestamp
    drops), less the message's rounding. An arrival whose Lease went with its recycled
    Exporter before the memory's next write counted no more before it was kept."""
    decay = math.exp(-(seen.span_s + 2) / WINDOW_S)
    return BURST * decay / WINDOW_S * 60 - 0.01


def _served(pool: Pool, seen: Burst) -> None:
    assert sorted(seen.leases) == sorted(f"burst-{i}" for i in range(BURST))
    assert all(lease["status"].get("beginTime") for lease in seen.leases.values())
    assert not _deleted_while_serving(pool, seen), pool.describe()


def test_an_auto_buffer_against_a_fixed_buffer_of_the_same_cost(pools: Any) -> None:
    with pools("auto") as pool:
        pool.apply(annotations=AUTO, minAvailableReplicas=0, maxReplicas=CEILING)
        pool.wait("the first pass", lambda: _IN_FORCE.search(str(pool.status())))
        auto = _Driver(pool).run()
        _served(pool, auto)
        assert auto.most_in_force > 0, auto.demand_messages  # above its floor of 0
        assert any("from demand" in m for m in auto.demand_messages)
        assert _learned_rate(auto) >= _every_arrival_learned(auto), auto.last_message
    same_cost = round(auto.idle_s / auto.span_s)
    with pools("fixed") as pool:
        pool.apply(minAvailableReplicas=same_cost, maxReplicas=CEILING)
        pool.wait_warm(same_cost, timeout=180)
        fixed = _Driver(pool).run()
        _served(pool, fixed)
    record_figure(
        f"demand burst of {BURST} Leases every {GAP_S:g} s, held {HOLD_S:g} s, ceiling "
        f"{CEILING}: auto (floor 0, highest buffer {auto.most_in_force}): {auto.summary()}"
    )
    timeline = ", ".join(f"{b} at {t:.0f} s" for t, b in auto.in_force)
    record_figure(f"demand burst, auto's buffer in force: {timeline}; last: {auto.last_message}")
    record_figure(
        f"demand burst, fixed minAvailableReplicas {same_cost} (auto's mean idle "
        f"{auto.idle_s / auto.span_s:.2f} rounded): {fixed.summary()}"
    )
