"""Instances matched to their Pods by uid, failures told apart from finished instances,
and the pool's backoff (`pool.rules.backoff`), through the real planner."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pool.model.actions import (
    CreateExporter,
    CreatePod,
    DeletePod,
    PromoteStandby,
    RecordEvent,
    RememberBackoff,
    Remove,
)
from pool.model.backoff import Backoff, delay
from pool.model.reasons import BACK_OFF, PODS_FAILING, SET_DEGRADED
from pool.model.views import ExporterView, Observation, PodView
from pool.rules.planner import Plan, plan
from pool.rules.stages.settle import FENCE_SETTLE
from pool.rules.transitions import REASONS as TRANSITIONS
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready, standby

S = timedelta(seconds=1)


def observe(exporters: list[ExporterView], pods: list[PodView], **kw: Any) -> Observation:
    extra = {k: kw.pop(k) for k in ("expected_exporters", "expected_pods") if k in kw}
    return Observation(
        pool=pool(**{"min_available": 0, "min_replicas": 2, "max_replicas": 2, **kw}),
        klass=klass(),
        exporters=tuple(exporters),
        pods=tuple(pods),
        **extra,
    )


def of(result: Plan, kind: type) -> list[Any]:
    return [a for a in result.actions if isinstance(a, kind)]


def condition(result: Plan, kind: str) -> dict[str, Any]:
    return next(c for c in result.status["conditions"] if c["type"] == kind)  # type: ignore[attr-defined]


def failed_pod(name: str, uid: str, at: int, message: str = "Driver not installed") -> PodView:
    return PodView(
        name, name, "Succeeded", uid, f"pod-{uid}", created=T0, exited=True, exit_code=0,
        finished_at=T0 + at * S, message=message,
    )  # fmt: skip


def test_an_earlier_pod_of_the_same_name_is_not_charged_to_the_new_instance() -> None:
    new = booting("pool-0", uid="new")
    old = PodView("pool-0", "pool-0", "Succeeded", "old", "pod-old", deleting=True)
    result = plan(observe([new, ready("pool-1", uid="b")], [old], min_replicas=2), T0)
    assert not of(result, Remove)  # the old Pod's end is not the new instance's
    assert not of(result, DeletePod)  # being deleted already: not deleted again
    assert of(result, CreatePod) == [CreatePod("pool-1")]  # pool-0's name is held: it waits
    assert any("earlier Exporter is still there" in w.reason for w in result.waits)
    lingering = replace(old, deleting=False)
    deletes = of(plan(observe([new], [lingering], min_replicas=1), T0), DeletePod)
    assert [(d.name, d.uid) for d in deletes] == [("pool-0", "pod-old")]


def test_remove_carries_the_uids_of_the_instance_and_its_own_pods() -> None:
    done = ready("pool-0", uid="u0", online=False)
    own = PodView("pool-0", "pool-0", "Succeeded", "u0", "p0")
    observed = observe([done, standby()], [own], min_replicas=0, max_replicas=0)
    (remove,) = of(plan(observed, T0), Remove)
    assert (remove.uid, remove.pods) == ("u0", (("pool-0", "p0"),))


def test_failures_back_off_with_one_probe_and_say_so() -> None:
    a, b = booting("pool-0", uid="a"), booting("pool-1", uid="b")
    pods = [failed_pod("pool-0", "a", 1), failed_pod("pool-1", "b", 2, "endpoint unreachable")]
    first = plan(observe([a, b], pods), T0 + 3 * S)
    # The pool remembers first; the failed instances leave once its memory holds them.
    (memory,) = of(first, RememberBackoff)
    quote = "exited with code 0: endpoint unreachable"
    assert memory.backoff == Backoff(1, T0 + 2 * S, "pool-1", quote, ".")
    assert not of(first, Remove) and not of(first, CreateExporter)
    degraded = condition(first, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", PODS_FAILING)
    assert "pool-1" in degraded["message"] and "endpoint unreachable" in degraded["message"]
    events = [e.reason for e in of(first, RecordEvent)]
    assert [e for e in events if e not in TRANSITIONS] == [BACK_OFF]
    assert SET_DEGRADED in events  # Degraded turned True
    assert first.status["podsFailed"] == 2 and first.status["podsRunning"] == 0
    # Remembered: the older failure goes, the newest is the record until its delay is over.
    kept = {"backoff": memory.backoff, "status": first.status}
    early = plan(observe([a, b], pods, **kept), T0 + 4 * S)
    assert [r.name for r in of(early, Remove)] == ["pool-0"]
    assert not of(early, CreateExporter) and not of(early, RememberBackoff)
    assert not of(early, RecordEvent)  # the same step: no second Event
    (record,) = early.waits  # the newest stays until its delay is over
    assert record.at == T0 + 2 * S + delay(0) and record.action == Remove("pool-1", True)
    assert early.requeue_after == FENCE_SETTLE  # sooner: the pass that deletes pool-0
    # the delay is over: the record goes and exactly one probe comes, one step further
    due = plan(observe([b], pods[1:], **kept), T0 + 2 * S + delay(0))
    assert [r.name for r in of(due, Remove)] == ["pool-1"]
    assert [(c.name, c.step) for c in of(due, CreateExporter)] == [("pool-", 1)]


def test_at_the_ceiling_the_probe_follows_the_removal_with_the_next_step() -> None:
    """min = max = 1: the record holds the only slot, so the probe comes a pass after its
    removal; the pool's memory gives it the next step, and nothing flaps meanwhile. With
    its standby there (the record was its only enabled Exporter), the probe is the standby
    made an instance; without, a new Exporter."""
    size = {"min_replicas": 1, "max_replicas": 1, "min_available": 1}
    record = booting("pool-a", uid="a", backoff_step=2)
    pod = failed_pod("pool-a", "a", 1)
    memory = Backoff(3, T0 + S, "pool-a", "exited with code 0: Driver not installed", ".")
    status = plan(observe([record], [pod], backoff=memory, **size), T0 + 2 * S).status
    kept = {"backoff": memory, "status": status, **size}
    due = T0 + S + delay(2)
    removal = plan(observe([record, standby()], [pod], **kept), due)
    assert [r.name for r in of(removal, Remove)] == ["pool-a"] and not of(removal, CreateExporter)
    for cached in ([record], []):  # the removed record still in the cache, or gone
        probe = plan(observe([*cached, standby()], [pod] if cached else [], **kept), due + S)
        promoted = [(c.name, c.step) for c in of(probe, PromoteStandby)]
        assert promoted == ([] if cached else [("pool-s", 3)])  # never step 0
        assert not of(probe, CreateExporter)
        fresh = plan(observe(cached, [pod] if cached else [], **kept), due + S)
        creates = [(c.name, c.step) for c in of(fresh, CreateExporter) if not c.standby]
        assert creates == ([] if cached else [("pool-", 3)])
        for result in (removal, probe):
            assert condition(result, "Degraded")["status"] == "True"
            assert condition(result, "ScalingLimited")["status"] == "False"
            assert not of(result, RecordEvent)  # no Recovered, no Limited, no second BackOff
    # The probe, created but not in the cache yet (the runtime's expectations): no second.
    expected = plan(observe([], [], expected_exporters={"pool-b"}, **kept), due + 2 * S)
    assert not of(expected, CreateExporter) and not of(expected, RecordEvent)
    assert condition(expected, "Degraded")["status"] == "True"


def test_a_registration_after_the_last_failure_ends_the_backoff() -> None:
    memory = Backoff(4, T0 + S, "pool-a", "exited (no termination message)", ".")
    probe = booting("pool-b", uid="b", backoff_step=4)
    running = PodView("pool-b", "pool-b", "Running", "b", "pb", created=T0 + 90 * S)
    booting_probe = plan(observe([probe], [running], backoff=memory), T0 + 100 * S)
    assert condition(booting_probe, "Degraded")["status"] == "True"
    assert not of(booting_probe, RememberBackoff) and not of(booting_probe, CreateExporter)
    up = registered(probe, T0 + 101 * S)
    healed = plan(observe([up], [running], backoff=memory), T0 + 102 * S)
    assert of(healed, RememberBackoff) == [RememberBackoff(None)]
    assert condition(healed, "Degraded")["status"] == "False"
    assert [(c.name, c.step) for c in of(healed, CreateExporter)] == [("pool-", 0)]
    # One registered before the last failure ends nothing.
    old = registered(booting("pool-c", uid="c"), T0)
    still = plan(observe([old], [], backoff=memory), T0 + 102 * S)
    assert condition(still, "Degraded")["status"] == "True" and not of(still, RememberBackoff)


def test_a_booting_probe_holds_creates_and_a_registered_one_ends_the_backoff() -> None:
    probe = booting("pool-0", uid="p", backoff_step=3)
    waiting = plan(observe([probe], [PodView("pool-0", "pool-0", "Running", "p")]), T0)
    assert not of(waiting, CreateExporter)
    assert condition(waiting, "Degraded")["reason"] == PODS_FAILING
    fixed = replace(probe, registered=True, online=True, exporter_status="Available")
    filled = plan(observe([fixed], [PodView("pool-0", "pool-0", "Running", "p")]), T0)
    assert [(c.name, c.step) for c in of(filled, CreateExporter)] == [("pool-", 0)]
    assert condition(filled, "Degraded")["status"] == "False"


def test_a_nonzero_exit_fails_even_after_registering_and_an_exited_exporter_is_not_ready() -> None:
    served = ready("pool-0", uid="a")
    crashed = PodView("pool-0", "pool-0", "Failed", "a", "pa", exited=True, exit_code=3)
    assert condition(plan(observe([served], [crashed]), T0), "Degraded")["status"] == "True"
    stopping = PodView("pool-0", "pool-0", "Running", "a", "pa", exited=True, exit_code=0)
    result = plan(observe([served], [stopping], recycle="InPlaceReuse"), T0)
    assert result.status["readyReplicas"] == 0 and result.status["podsRunning"] == 0


def test_expected_writes_are_not_repeated() -> None:
    credentialed = booting("pool-0", uid="a")
    result = plan(observe([credentialed], [], min_replicas=1, expected_pods={"a"}), T0)
    assert not of(result, CreatePod)
    waiting = plan(observe([], [], min_replicas=2, expected_exporters={"pool-0"}), T0)
    assert [c.name for c in of(waiting, CreateExporter)] == ["pool-"]


# -- random interleavings of "old Pod still terminating" and "new Exporter, same name" --


@dataclass
class Model:
    """One pool of `size` slots: Exporters by name with uids, Pods with finalizers; the
    runtime's steps applied as the executor does (uid preconditions, 409 on a held name)."""

    size: int
    now: Any = T0
    serial: int = 0
    exporters: dict[str, ExporterView] = field(default_factory=dict)
    pods: dict[str, PodView] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)  # Pods with a finalizer

    def observe(self) -> Observation:
        return observe(
            list(self.exporters.values()),
            list(self.pods.values()),
            min_replicas=self.size,
            max_replicas=self.size,
        )

    def delete_pod(self, name: str, uid: str) -> None:
        pod = self.pods.get(name)
        if pod is None or pod.uid != uid:
            return
        if name in self.held:
            self.pods[name] = replace(pod, deleting=True)
        else:
            del self.pods[name]

    def apply(self, action: Any) -> None:
        match action:
            case CreateExporter(prefix):
                # The lowest free name: the apiserver never reuses one, but the planner
                # must hold even so (a Pod of an earlier Exporter of that name may linger).
                name = next(
                    f"{prefix}{i}" for i in range(9) if f"{prefix}{i}" not in self.exporters
                )
                self.serial += 1
                self.exporters[name] = ExporterView(name, self.now, uid=f"u{self.serial}")
            case CreatePod(name) if name in self.exporters and name not in self.pods:
                owner = self.exporters[name].uid
                self.serial += 1
                uid = f"p{self.serial}"
                self.pods[name] = PodView(name, name, "Running", owner, uid, created=self.now)
            case DeletePod(name, _, uid):
                self.delete_pod(name, uid)
            case Remove(name, _, _, uid, pods) if self.exporters.get(name, booting("")).uid == uid:
                del self.exporters[name]
                for pod_name, pod_uid in pods:
                    self.delete_pod(pod_name, pod_uid)


EVENTS = ["pass", "register", "finish", "fail", "hold", "free", "tick"]


def registered(exporter: ExporterView, now: Any) -> ExporterView:
    return replace(
        exporter, registered=True, online=True, registered_at=now, exporter_status="Available"
    )


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 2),
    st.lists(
        st.tuples(
            st.sampled_from(["pass", "register", "finish", "fail", "hold", "free", "tick"]),
            st.integers(0, 1),
        ),
        max_size=40,
    ),
)
def test_a_pod_is_only_ever_charged_to_the_exporter_whose_uid_owns_it(
    size: int, events: list[tuple[str, int]]
) -> None:
    model = Model(size)
    for kind, index in [*events, *[("free", 0), ("register", 0), ("register", 1)] * 4]:
        names = sorted(model.exporters)
        name = names[index % len(names)] if names else ""
        exporter, pod = model.exporters.get(name), model.pods.get(name)
        if kind == "pass":
            result = plan(model.observe(), model.now)
            for action in result.actions:
                if isinstance(action, Remove):
                    own = [p for p in model.pods.values() if p.owner_uid == action.uid]
                    assert own and all(p.done for p in own), f"{action} charged a stranger's Pod"
                if isinstance(action, DeletePod):
                    target = model.pods[action.name]
                    assert target.uid == action.uid and not target.deleting
                if isinstance(action, CreatePod):
                    assert action.exporter not in model.pods, "a Pod over a held name"
                model.apply(action)
        elif kind == "register" and exporter is not None:
            model.exporters[name] = registered(exporter, model.now)
        elif kind in ("finish", "fail") and pod and exporter and pod.owner_uid == exporter.uid:
            code = 0 if kind == "finish" else 1
            ended = {"phase": "Succeeded", "exited": True, "finished_at": model.now}
            model.pods[name] = replace(pod, exit_code=code, **ended)
        elif kind == "hold" and pod is not None:
            model.held.add(name)
        elif kind == "free":
            model.held.clear()
            model.pods = {n: p for n, p in model.pods.items() if not p.deleting}
        model.now += timedelta(minutes=10) if kind in ("tick", "free") else S
    for _ in range(4 * size + 6):  # settled: every slot filled, each Pod its Exporter's
        for action in plan(model.observe(), model.now).actions:
            model.apply(action)
        model.now += timedelta(minutes=10)
        for n, e in model.exporters.items():
            model.exporters[n] = registered(e, model.now)
    assert len(model.exporters) == size
    assert {p.owner_uid for p in model.pods.values()} == {e.uid for e in model.exporters.values()}
