"""The backoff outlives its failed instances (`pool.rules.backoff`): a property test
through the real planner, over pool shapes, lagging caches and restarts.

`Cluster` plays the apiserver (Exporters, Pods, the pool's memory and status), the
kubelet (every Pod ends before its exporter registers, as 0.9.0's `jmp run` after five
quick failures: Succeeded, with or without a container status, until the pool is
fixed), and the runtime around the planner: caches that lag (a removed instance still
shown, a new one not yet; the pool's memory as it was), the expectations of a process
(creates the cache has not shown; Events written), a restart that drops them and reads
afresh. Times are whole seconds, as the API writes them.

Checked: the k-th probe carries step k (never 0 again while failing) and comes no sooner
than delay(k - 1) after the one before; one probe at a time; one BackOff Event per step;
Degraded never turns False, and no Recovered Event is written, before an exporter
registers; a pool whose demand fits maxReplicas is never ScalingLimited. Then, caches
current, the delays between creates double up to the cap, and a fixed pool fills.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pool.model.actions import (
    CreateExporter,
    CreatePod,
    DeletePod,
    PatchStatus,
    PromoteStandby,
    RecordEvent,
    RememberBackoff,
    Remove,
    SetSurplusSince,
)
from pool.model.backoff import CAP, Backoff, delay
from pool.model.reasons import BACK_OFF, SET_RECOVERED
from pool.model.status import condition_of
from pool.model.views import ExporterView, Observation, PodView
from pool.rules.planner import Plan, plan
from tests.unit.test_reconciler_support import T0, klass, pool

S = timedelta(seconds=1)
LAST_WORDS = "Exporter child process failed 5 times within 60s each."


@dataclass
class Cluster:
    min_replicas: int
    max_replicas: int
    warm: int
    # the apiserver
    exporters: dict[str, ExporterView] = field(default_factory=dict)
    pods: dict[str, PodView] = field(default_factory=dict)
    ends: dict[str, tuple[datetime, bool]] = field(default_factory=dict)  # pod: (end, status?)
    memory: Backoff | None = None
    surplus: datetime | None = None
    status: dict[str, Any] = field(default_factory=dict)
    serial: int = 0
    fixed: bool = False  # exporters register from now on
    # the caches (they never go back) and the process
    cached: tuple[dict[str, ExporterView], dict[str, PodView]] = ({}, {})
    cached_memory: Backoff | None = None
    expected: set[str] = field(default_factory=set)
    written: set[tuple[str, str]] = field(default_factory=set)  # Events, for a dedupe
    # what happened
    creates: list[tuple[datetime, int]] = field(default_factory=list)
    events: list[RecordEvent] = field(default_factory=list)
    failed_once: bool = False
    registered_once: bool = False

    @property
    def desired(self) -> int:
        wanted = max(self.min_replicas, self.warm)
        return min(wanted, self.max_replicas) if self.max_replicas else wanted

    def observe(self) -> Observation:
        exporters, pods = self.cached
        self.expected = {n for n in self.expected if n not in exporters}
        view = pool(
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            min_available=self.warm,
            backoff=self.cached_memory,
            surplus_since=self.surplus,
            status=self.status,
        )
        return Observation(
            view,
            klass(),
            tuple(exporters.values()),
            tuple(pods.values()),
            expected_exporters=frozenset(self.expected),
        )

    def catch_up(self, exporters: bool, memory: bool) -> None:
        if exporters:
            self.cached = (dict(self.exporters), dict(self.pods))
        if memory:
            self.cached_memory = self.memory

    def restart(self) -> None:
        """A new process (or leader): fresh caches, no expectations, no Event memory."""
        self.catch_up(True, True)
        self.expected, self.written = set(), set()

    def kubelet(self, now: datetime, fail_after: int, with_status: bool) -> None:
        for name, pod in list(self.pods.items()):
            if pod.phase != "Pending":
                continue
            end, detailed = self.ends.setdefault(name, (now + fail_after * S, with_status))
            if end > now:
                continue
            exporter = self.exporters[name]
            if self.fixed:
                self.pods[name] = replace(pod, phase="Running")
                self.exporters[name] = replace(
                    exporter, registered=True, online=True, exporter_status="Available",
                    registered_at=end,
                )  # fmt: skip
                self.registered_once = True
            else:
                ended = {"exited": True, "exit_code": 0, "finished_at": end}
                self.pods[name] = replace(
                    pod, phase="Succeeded", message=LAST_WORDS, **(ended if detailed else {})
                )
                self.failed_once = True

    def next_end(self) -> datetime | None:
        """When the kubelet ends a Pod next."""
        ends = [
            self.ends[n][0] for n, p in self.pods.items() if p.phase == "Pending" and n in self.ends
        ]
        return min(ends, default=None)

    def apply(self, result: Plan, now: datetime) -> None:
        for action in result.actions:
            match action:
                case CreateExporter(prefix, _, step, revision, standby):
                    self.serial += 1
                    name = f"{prefix}{self.serial}"
                    self.exporters[name] = ExporterView(
                        name, now, uid=name, backoff_step=step, revision=revision, standby=standby
                    )
                    self.expected.add(name)
                    if not standby:  # a standby is no instance: it gets no Pod
                        self.creates.append((now, step))
                # Conditional on the resourceVersion planned: a plan from a lagging cache
                # that still shows it a standby changes nothing (a 409).
                case PromoteStandby(name, _, revision, step) if (
                    name in self.exporters and self.exporters[name].standby
                ):
                    self.exporters[name] = replace(
                        self.exporters[name], standby=False, backoff_step=step, revision=revision
                    )
                    self.creates.append((now, step))
                case CreatePod(name) if name in self.exporters and name not in self.pods:
                    self.pods[name] = PodView(name, name, "Pending", name, f"p-{name}", created=now)
                case DeletePod(name, _, uid) if name in self.pods and self.pods[name].uid == uid:
                    del self.pods[name]
                case Remove(name, _, _, uid) if self.exporters.get(name) is not None:
                    if self.exporters[name].uid == uid:
                        del self.exporters[name]
                        self.pods.pop(name, None)
                case RememberBackoff(backoff):
                    self.memory = backoff
                case SetSurplusSince(since):
                    self.surplus = since
                case PatchStatus(status):
                    self.status = dict(status)
                case RecordEvent(reason, note) if (reason, note) not in self.written:
                    self.written.add((reason, note))
                    self.events.append(action)

    def probes_booting(self) -> int:
        """Instances created while failing whose Pod has not ended yet."""
        return sum(
            1
            for e in self.exporters.values()
            if e.backoff_step > 0
            and self.pods.get(e.name, PodView("", "", "Pending")).phase == "Pending"
        )


def check(cluster: Cluster, result: Plan) -> None:
    degraded = condition_of(result.status, "Degraded")
    if cluster.failed_once and not cluster.registered_once:
        before = condition_of(cluster.status, "Degraded")
        if before.get("status") == "True":
            assert degraded.get("status") == "True", f"Degraded turned False: {degraded}"
        assert not [e for e in cluster.events if e.reason == SET_RECOVERED], "Recovered"
    limited = condition_of(result.status, "ScalingLimited")
    if cluster.max_replicas and max(cluster.min_replicas, cluster.warm) <= cluster.max_replicas:
        assert limited.get("status") != "True", f"limited by its own probe: {limited}"
    if cluster.max_replicas:
        instances = [e for e in cluster.exporters.values() if not e.standby]
        assert len(instances) <= cluster.max_replicas, "over maxReplicas"
    assert cluster.probes_booting() <= 1, "two probes at once"
    steps = [int(m) for e in cluster.events if e.reason == BACK_OFF
             for m in re.findall(r"failure (\d+) in a row", e.note)]  # fmt: skip
    assert len(steps) == len(set(steps)), f"a step written twice: {steps}"


def check_creates(cluster: Cluster) -> None:
    """Probes carry 1, 2, 3, ... and each waits at least the delay of the step before;
    until an exporter registers, the only instances made as a healthy pool's (step 0)
    are the first ones."""
    if not cluster.registered_once:
        fresh = sum(1 for _, step in cluster.creates if step == 0)
        assert fresh <= cluster.desired, f"{fresh} instances at step 0: the backoff forgot"
    probes = [(at, step) for at, step in cluster.creates if step]
    assert [step for _, step in probes] == list(range(1, len(probes) + 1)), probes
    for (before, _), (at, step) in pairwise(probes):
        assert at - before >= delay(step - 1), f"probe {step} {at - before} after the last"


passes = st.lists(
    st.tuples(
        st.integers(1, 20),  # seconds to the next pass
        st.booleans(),  # the Exporter and Pod caches catch up (else they show the last)
        st.booleans(),  # the cache of the pool's memory catches up
        st.sampled_from([0, 1, 3, 12]),  # seconds a new Pod runs before it ends
        st.booleans(),  # it ends with a container status (else phase only)
        st.integers(0, 9),  # 0: the process restarts
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)),
    script=passes,
    fix=st.booleans(),
)
@example(shape=(1, 1, 1), script=[], fix=False)  # the ceiling case of a single slot
@example(shape=(4, 4, 0), script=[], fix=True)
def test_the_backoff_outlives_its_records(
    shape: tuple[int, int, int], script: list[tuple[Any, ...]], fix: bool
) -> None:
    low, high, warm = shape
    if high:
        low = min(low, high)
    if max(low, warm) == 0:
        warm = 1  # a pool that wants something
    cluster = Cluster(low, high, warm)
    now, lagging = T0, 0
    for seconds, fresh, fresh_memory, fail_after, detailed, restart in script:
        now += seconds * S
        cluster.kubelet(now, fail_after, detailed)
        lagging = 0 if fresh or lagging >= 2 else lagging + 1  # a cache lags a few passes
        cluster.catch_up(lagging == 0, fresh_memory)
        if restart == 0:
            cluster.restart()
        result = plan(cluster.observe(), now)
        check(cluster, result)
        cluster.apply(result, now)
        check_creates(cluster)

    # Caches current, passes when something changes or is due: the delays double.
    tail = len(cluster.creates)
    horizon = now + 25 * 60 * S
    while now < horizon:
        cluster.kubelet(now, 1, False)
        cluster.catch_up(True, True)
        result = plan(cluster.observe(), now)
        check(cluster, result)
        cluster.apply(result, now)
        check_creates(cluster)
        wake = [now + (result.requeue_after or timedelta(minutes=5)) + S]
        end = cluster.next_end()
        if result.actions:
            wake.append(now + S)  # the watch shows the writes
        if end is not None and end > now:
            wake.append(end)
        now = max(min(wake), now + S).replace(microsecond=0)
    probes = [(at, step) for at, step in cluster.creates[tail:] if step]
    for (before, _), (at, step) in pairwise(probes):
        # the one before ran 1 s; a pass follows its end and the record's removal
        assert at - before <= delay(step - 1) + 4 * S, f"probe {step} late: {at - before}"
    last = max(step for _, step in cluster.creates)
    assert delay(last - 1) == CAP, cluster.creates  # 25 minutes reach the cap

    if fix:  # the pool is fixed: the next probe registers and the pool fills
        cluster.fixed = True
        for _ in range(200):
            now += 10 * S
            cluster.kubelet(now, 1, False)
            cluster.catch_up(True, True)
            result = plan(cluster.observe(), now)
            check(cluster, result)
            cluster.apply(result, now)
        assert len(cluster.exporters) == cluster.desired
        assert condition_of(cluster.status, "Degraded").get("status") == "False"
        assert cluster.memory is None
