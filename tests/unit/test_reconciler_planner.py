"""The planner on hand-made pools: one docs/design.md §4 rule per test."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from pool.model.actions import (
    CreateExporter,
    CreatePod,
    DeletePod,
    LiftFence,
    MarkServed,
    PatchStatus,
    Protect,
    RecordEvent,
    Remove,
    Retain,
    SetSurplusSince,
)
from pool.model.keys import SET_LABEL
from pool.model.reasons import WAITING_FOR_CREDENTIALS
from pool.model.views import ExporterView, LeaseView, Observation, PodView
from pool.rules.planner import Plan, plan
from pool.rules.stages.upkeep import AWAITING_REQUEUE
from pool.rules.transitions import REASONS as TRANSITIONS
from tests.unit.test_reconciler_support import T0, booting, klass, owing, pool, ready


def run(exporters: list[ExporterView], *, pods: bool = True, now=T0, **kw: Any) -> Plan:  # type: ignore[no-untyped-def]
    own = ("leases", "klass", "problem", "awaiting")
    pool_kw = {k: v for k, v in kw.items() if k not in own}
    obs = Observation(
        pool=pool(**pool_kw),
        klass=kw.get("klass", klass()),
        exporters=tuple(exporters),
        pods=tuple(PodView(e.name, e.name, "Running") for e in exporters) if pods else (),
        leases=tuple(kw.get("leases", ())),
        problem=kw.get("problem"),
        awaiting=kw.get("awaiting", {}),
    )
    return plan(obs, now)


def of(result: Plan, kind: type) -> list[Any]:
    return [a for a in result.actions if isinstance(a, kind)]


def condition(result: Plan, kind: str) -> dict[str, Any]:
    return next(c for c in result.status["conditions"] if c["type"] == kind)  # type: ignore[attr-defined]


def test_empty_pool_fills_its_warm_buffer_with_generated_names() -> None:
    result = run([], min_available=2)
    # generateName "pool-": the apiserver completes it, so no name is ever reused
    assert of(result, CreateExporter) == [CreateExporter("pool-"), CreateExporter("pool-")]
    assert result.desired == 2


def test_provisioning_instances_count_as_capacity() -> None:
    assert not of(run([booting("pool-0"), booting("pool-1")], min_available=2), CreateExporter)


def test_floor_applies_without_demand() -> None:
    assert len(of(run([], min_available=0, min_replicas=3), CreateExporter)) == 3


def test_busy_instance_brings_a_replacement() -> None:
    result = run([ready("pool-0", lease_ref="l1"), ready("pool-1")], min_available=2)
    assert of(result, CreateExporter) == [CreateExporter("pool-")]


def test_owed_after_lease_hook_is_not_warm() -> None:
    result = run([owing("pool-0"), ready("pool-1")], min_available=2)
    assert result.status["availableReplicas"] == 1
    assert len(of(result, CreateExporter)) == 1


def test_ceiling_counts_draining_instances() -> None:
    disabled = [ready(f"pool-{i}", enabled=False) for i in range(2)]
    result = run([*disabled, ready("pool-2")], min_available=2, max_replicas=3)
    assert not of(result, CreateExporter)
    assert condition(result, "ScalingLimited")["status"] == "True"
    assert not of(result, Remove)  # disabled by a person, not fenced by the pool: left alone


def test_ceiling_caps_desired() -> None:
    leased = [ready(f"pool-{i}", lease_ref=f"l{i}") for i in range(3)]
    result = run(leased, min_available=2, max_replicas=4)
    assert result.desired == 4
    assert of(result, CreateExporter) == [CreateExporter("pool-")]
    assert condition(result, "ScalingLimited")["reason"] == "AtMaxReplicas"


def test_surplus_waits_for_the_cooldown_and_remembers_since_when() -> None:
    four = [ready(f"pool-{i}", minute=i) for i in range(4)]
    first = run(four, min_available=2)
    assert of(first, SetSurplusSince) == [SetSurplusSince(T0)]
    assert not of(first, Remove)
    assert first.requeue_after == timedelta(minutes=5)
    early = run(four, min_available=2, surplus_since=T0, now=T0 + timedelta(minutes=4))
    assert not of(early, Remove) and not of(early, SetSurplusSince)
    due = run(four, min_available=2, surplus_since=T0, now=T0 + timedelta(minutes=5))
    assert of(due, Remove) == [Remove("pool-3", fence=True), Remove("pool-2", fence=True)]


def test_victims_are_never_busy_and_not_ready_go_first() -> None:
    members = [
        ready("pool-0", minute=0),
        booting("pool-1", minute=1),
        ready("pool-2", minute=9, lease_ref="l1"),
        ready("pool-3", minute=3),
    ]
    result = run(members, min_available=1, surplus_since=T0, now=T0 + timedelta(hours=1))
    assert result.desired == 2
    assert of(result, Remove) == [Remove("pool-1", fence=True), Remove("pool-3", fence=True)]


def test_surplus_gone_clears_the_memory() -> None:
    result = run([ready("pool-0"), ready("pool-1")], min_available=2, surplus_since=T0)
    assert of(result, SetSurplusSince) == [SetSurplusSince(None)]


def test_wait_for_first_consumer_scales_on_matching_pending_leases() -> None:
    wffc = klass(binding="WaitForFirstConsumer")
    leases = [
        LeaseView("l1", {"matchLabels": {"board": "qemu"}}),
        LeaseView("l2", {"matchLabels": {SET_LABEL: "pool"}}),
        LeaseView("l3", {"matchLabels": {"board": "other"}}),
        LeaseView("l4", {"matchLabels": {"board": "qemu"}}, ended=True),
    ]
    result = run([], min_available=3, klass=wffc, leases=leases)
    assert result.pending_leases == 2
    assert len(of(result, CreateExporter)) == 2


def test_exit_and_replace_removes_a_released_instance() -> None:
    result = run([ready("pool-0", served_lease="l1"), ready("pool-1")], min_available=1)
    assert Remove("pool-0", fence=True) in result.actions


def test_finished_pod_under_exit_and_replace_is_removed() -> None:
    # It registered, so it finished (recycled); one that never did failed (test_..._failures).
    obs = Observation(
        pool=pool(min_available=1),
        klass=klass(),
        exporters=(ready("pool-0", online=False),),
        pods=(PodView("pool-0", "pool-0", "Succeeded"),),
    )
    result = plan(obs, T0)
    assert Remove("pool-0", fence=True) in result.actions
    assert of(result, CreateExporter) == [CreateExporter("pool-")]


def test_in_place_reuse_keeps_a_released_instance_and_replaces_its_finished_pod() -> None:
    result = run([ready("pool-0", served_lease="l1")], min_available=1, recycle="InPlaceReuse")
    assert not of(result, Remove)
    obs = Observation(
        pool=pool(min_available=1, recycle="InPlaceReuse"),
        klass=klass(),
        exporters=(ready("pool-0"),),
        pods=(PodView("pool-0", "pool-0", "Failed"),),
    )
    assert of(plan(obs, T0), DeletePod) == [DeletePod("pool-0")]


def test_retain_detaches_a_released_instance_whatever_the_strategy() -> None:
    for strategy in ("ExitAndReplace", "InPlaceReuse"):
        result = run(
            [ready("pool-0", served_lease="l1")],
            min_available=1,
            recycle=strategy,
            klass=klass(reclaim="Retain"),
        )
        assert of(result, Retain) == [Retain("pool-0")]


def test_served_leases_are_remembered_while_busy() -> None:
    # With the lease protection, in one write.
    result = run([ready("pool-0", lease_ref="l7")], min_available=0)
    assert of(result, Protect) == [Protect("pool-0", served="l7")]
    assert not of(result, MarkServed)
    protected = run([ready("pool-0", lease_ref="l7", protected=True)], min_available=0)
    assert of(protected, MarkServed) == [MarkServed("pool-0", "l7")]
    assert not of(protected, Protect)
    in_place = run([ready("pool-0", lease_ref="l7")], min_available=0, recycle="InPlaceReuse")
    assert not of(in_place, MarkServed)
    assert of(in_place, Protect) == [Protect("pool-0")]


def test_fenced_instance_is_deleted_once_not_busy() -> None:
    fenced = ready("pool-0", enabled=False, fenced=True)
    assert of(run([fenced], min_available=0), Remove) == [Remove("pool-0", fence=False)]
    leased = replace(fenced, lease_ref="l1")  # a Lease took it: its fence is lifted
    assert not of(run([leased], min_available=0), Remove)
    assert of(run([leased], min_available=0), LiftFence) == [LiftFence("pool-0")]


def test_missing_pods_are_created_and_orphans_deleted() -> None:
    obs = Observation(
        pool=pool(min_available=1),
        klass=klass(),
        exporters=(booting("pool-0"),),
        pods=(PodView("pool-9", "pool-9", "Running"),),
    )
    result = plan(obs, T0)
    assert CreatePod("pool-0") in result.actions and DeletePod("pool-9") in result.actions


def test_problem_stops_scaling_without_deleting() -> None:
    members = [ready(f"pool-{i}") for i in range(5)]
    result = run(
        members,
        min_available=1,
        surplus_since=T0,
        now=T0 + timedelta(hours=1),
        klass=None,
        problem=("VirtualTargetClassNotFound", 'VirtualTargetClass "qemu" not found'),
    )
    # Only the status and forgetting the surplus (the cooldown restarts after a repair).
    assert [a for a in result.actions if not isinstance(a, (PatchStatus, RecordEvent))] == [
        SetSurplusSince(None)
    ]
    assert {e.reason for e in of(result, RecordEvent)} <= TRANSITIONS  # conditions changed
    assert condition(result, "Degraded")["reason"] == "VirtualTargetClassNotFound"
    assert condition(result, "ScalingLimited")["status"] == "True"


def test_constant_world_writes_status_once_then_nothing() -> None:
    members = [ready("pool-0"), ready("pool-1")]
    first = run(members, min_available=2)
    assert of(first, PatchStatus)
    later = run(members, min_available=2, status=first.status, now=T0 + timedelta(hours=3))
    assert later.actions == ()


def test_status_counters_and_selector() -> None:
    members = [ready("pool-0"), ready("pool-1", lease_ref="l1"), booting("pool-2")]
    status = run(members, min_available=1).status
    assert status["replicas"] == 3
    assert status["availableReplicas"] == 1
    assert status["readyReplicas"] == 2
    assert status["leasedReplicas"] == 1
    assert status["exportersActive"] == 1
    assert status["exportersOffline"] == 1
    assert status["podsRunning"] == 3
    assert status["selector"] == "board=qemu"
    assert {c["observedGeneration"] for c in status["conditions"]} == {1}  # type: ignore[attr-defined]


def test_instances_without_credentials_get_no_pod_and_the_status_says_why() -> None:
    waiting = {"pool-1": "no status.credential and status.endpoint yet"}
    result = run([booting("pool-0"), booting("pool-1")], pods=False, awaiting=waiting)
    assert of(result, CreatePod) == [CreatePod("pool-0")]
    progressing = condition(result, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", WAITING_FOR_CREDENTIALS)
    assert progressing["message"] == (
        "1 instance(s) wait for credentials from Jumpstarter's controller; "
        "pool-1: no status.credential and status.endpoint yet"
    )
    assert [e for e in of(result, RecordEvent) if e.reason not in TRANSITIONS] == [
        RecordEvent(WAITING_FOR_CREDENTIALS, progressing["message"])
    ]
    assert result.requeue_after == AWAITING_REQUEUE and result.awaiting == ("pool-1",)
    # Still waiting on the next pass: the status already says so, no second Event.
    again = run(
        [booting("pool-0"), booting("pool-1")], pods=False, awaiting=waiting, status=result.status
    )
    assert not of(again, RecordEvent)


def test_running_credentialed_instances_are_kept_current() -> None:
    members = [ready("pool-0"), ready("pool-1"), ready("pool-2", enabled=False)]
    result = run(members, min_available=2, awaiting={"pool-1": 'Secret "c" not found'})
    assert result.keep_current == ("pool-0",)  # not the waiting one, not the draining one


def test_status_does_not_depend_on_the_order_the_caches_give_instances_in() -> None:
    members = [booting(f"pool-{i}") for i in range(4)]
    waiting = {e.name: "no status.credential and status.endpoint yet" for e in members}
    forward = run(members, pods=False, awaiting=waiting)
    backward = run(members[::-1], pods=False, awaiting=waiting)
    assert forward.status == backward.status and forward.awaiting == backward.awaiting
