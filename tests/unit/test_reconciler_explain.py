"""The planner's reasons, in the words the reconciler logs and `virtualtarget plan` prints."""

from __future__ import annotations

from datetime import timedelta

from pool.model.actions import (
    CreateExporter,
    CreatePod,
    DeletePod,
    LiftFence,
    MarkServed,
    PatchStatus,
    PromoteStandby,
    Protect,
    RecordEvent,
    RememberBackoff,
    RememberDemand,
    Remove,
    Retain,
    SetSurplusSince,
    Unprotect,
)
from pool.model.backoff import Backoff
from pool.model.demand import DemandMemory
from pool.model.views import LeaseView, Observation, PodView
from pool.rules.explain import VERBS, Step, describe, explain, held
from pool.rules.planner import Plan, plan
from pool.rules.stages.standby import HOLD, NEEDED
from pool.rules.transitions import REASONS as TRANSITIONS
from tests.unit.test_reconciler_planner import condition, run
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready, standby

MISSING = 'VirtualTargetClass "qemu-x86" not found in namespace "ns"'


def lines(result: Plan) -> list[str]:
    """The steps, but for the Events of condition transitions (`test_transition_events`)."""
    return [
        str(step)
        for step in explain(result)
        if not any(str(step).startswith(f"record event: {r},") for r in TRANSITIONS)
    ]


def test_warm_buffer_short_creates_with_the_terms_of_the_rule() -> None:
    result = run([], min_available=2)
    assert lines(result) == [
        "create 2 (pool-*): warm buffer 2, available 0",
        "update status",
    ]
    assert {a.why for a in result.actions if isinstance(a, CreateExporter)} == {
        "warm buffer 2, available 0"
    }


def test_busy_instances_cancel_out_of_the_reason() -> None:
    result = run(
        [ready("pool-0", lease_ref="l1"), ready("pool-1"), booting("pool-2")], min_available=3
    )
    assert "create pool-*: warm buffer 3, available 1, provisioning 1" in lines(result)


def test_the_floor_and_pending_leases_are_named_when_they_set_desired() -> None:
    assert lines(run([ready("pool-0")], min_available=0, min_replicas=3))[0] == (
        "create 2 (pool-*): minReplicas 3, available 1"
    )
    leases = [LeaseView(f"l{i}", {"matchLabels": {"board": "qemu"}}) for i in range(2)]
    wffc = run([], klass=klass(binding="WaitForFirstConsumer"), leases=leases)
    assert lines(wffc)[0] == "create 2 (pool-*): pending leases 2, available 0"


def test_cooldown_pending_shows_the_removal_and_when_it_happens() -> None:
    four = [ready(f"pool-{i}", minute=i) for i in range(4)]
    reason = "surplus since 2026-01-01T00:00:00Z, cooldown 5m"
    first = run(four, min_available=2)
    assert lines(first) == [
        "note surplus: capacity 4, desired 2",
        "update status",
        f"remove 2 (pool-3, pool-2) at 2026-01-01T00:05:00Z: {reason}",
    ]
    early = run(four, min_available=2, surplus_since=T0, now=T0 + timedelta(minutes=4))
    assert held(early.waits) == [
        Step("remove", ("pool-3", "pool-2"), reason, T0 + timedelta(minutes=5))
    ]
    assert not [a for a in early.actions if isinstance(a, Remove)]
    due = run(four, min_available=2, surplus_since=T0, now=T0 + timedelta(minutes=5))
    assert f"remove 2 (pool-3, pool-2): {reason}" in lines(due) and due.waits == ()
    gone = run(four[:2], min_available=2, surplus_since=T0)
    assert lines(gone)[0] == "forget surplus: no surplus now"


def test_missing_class_waits_and_says_why() -> None:
    result = run([ready("pool-0")], klass=None, problem=("ClassNotFound", MISSING))
    assert lines(result) == ["update status", f"waiting: {MISSING}"]
    remembered = run([], klass=None, problem=("ClassNotFound", MISSING), surplus_since=T0)
    # A pool with no instance keeps its standby even so: a Lease waits for the repair.
    assert lines(remembered)[:2] == [
        f"create standby pool-*: {NEEDED}",
        "forget surplus: scaling stopped (ClassNotFound)",
    ]


def test_ceiling_reached_caps_the_create_and_waits_in_the_status_words() -> None:
    leased = [ready(f"pool-{i}", lease_ref=f"l{i}") for i in range(3)]
    result = run(leased, min_available=2, max_replicas=4)
    assert "create pool-*: warm buffer 2, available 0, capped at maxReplicas 4" in lines(result)
    limited = condition(result, "ScalingLimited")["message"]
    assert (
        lines(result)[-1]
        == f"waiting: {limited}"
        == "waiting: 5 instance(s) wanted, maxReplicas is 4"
    )
    # Room under the ceiling is taken by an instance on its way out.
    fenced = ready("pool-0", enabled=False)
    room = run([fenced], min_available=3, max_replicas=3)
    assert (
        lines(room)[0]
        == "create 2 (pool-*): warm buffer 3, available 0, room for 2 under maxReplicas 3"
    )


def test_waiting_for_credentials_lists_the_instances_and_pods_say_why() -> None:
    waiting = {"pool-1": "no status.credential and status.endpoint yet"}
    result = run([booting("pool-0"), booting("pool-1")], pods=False, awaiting=waiting)
    assert lines(result)[0] == "create pod pool-0: credentials issued, no Pod yet"
    assert result.awaiting == ("pool-1",)


def test_recycling_says_which_lease_was_served_and_what_the_pool_does() -> None:
    released = run([ready("pool-0", served_lease="l1"), ready("pool-1")], min_available=1)
    assert "remove pool-0: served lease l1; ExitAndReplace replaces it" in lines(released)
    retain = klass(reclaim="Retain")
    kept = run([ready("pool-0", served_lease="l1"), standby()], min_available=0, klass=retain)
    assert "retain pool-0: served lease l1; reclaimPolicy Retain keeps it" in lines(kept)
    # The pool's last instance: its standby first, so a Lease meets an enabled Exporter.
    first = lines(run([ready("pool-0", served_lease="l1")], min_available=0, klass=retain))
    assert first[0] == f"create standby pool-*: {NEEDED}"
    assert first[-1] == f"retain pool-0: {HOLD}"
    finished = Observation(
        pool=pool(min_available=1),
        klass=klass(),
        exporters=(ready("pool-0", online=False),),
        pods=(PodView("pool-0", "pool-0", "Succeeded"), PodView("stray", "gone", "Running")),
    )
    assert lines(plan(finished, T0))[:3] == [  # new instances first: a boot may be awaited
        "create pool-*: warm buffer 1, available 0",
        "remove pool-0: its Pod finished (ExitAndReplace)",
        "delete pod stray: its Exporter is not in the pool",
    ]


def test_reasons_are_commentary_not_part_of_the_step() -> None:
    assert Remove("pool-0", True, "surplus") == Remove("pool-0", True)
    assert hash(CreateExporter("pool-", "why")) == hash(CreateExporter("pool-"))


def test_every_step_has_a_listed_verb_and_long_lists_are_cut() -> None:
    every = [
        CreateExporter("a"),
        CreateExporter("pool-", standby=True),
        PromoteStandby("a", "pending leases 1, available 0"),
        CreatePod("a"),
        DeletePod("a"),
        Remove("a", True),
        Remove("a", False),
        LiftFence("a", "a Lease took it"),
        Retain("a"),
        MarkServed("a", "l1"),
        Protect("a", "serves lease l1"),
        Unprotect("a", "no lease holds it any more"),
        SetSurplusSince(T0),
        SetSurplusSince(None),
        RememberBackoff(Backoff(1, T0, "a", "exited")),
        RememberBackoff(None),
        RememberDemand(DemandMemory(T0)),
        PatchStatus({}),
        RecordEvent("R", "note"),
    ]
    assert {describe(a)[0] for a in every} | {"waiting", "failed"} == set(VERBS)
    names = tuple(f"pool-{i}" for i in range(9))
    assert str(Step("create", names, "x")) == (
        "create 9 (pool-0, pool-1, pool-2, pool-3, pool-4, ... 4 more): x"
    )
