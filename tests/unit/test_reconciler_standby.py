"""The standby Exporter (`pool.rules.stages.standby`): a pool with no enabled instance keeps
one, so that Jumpstarter 0.9.0's lease controller pends a Lease it could serve (Offline)
instead of ending it (NoAccess when no Exporter matches, AllDisabled when every match is
disabled); the first instance the pool adds is the standby itself."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from pool.model.actions import CreateExporter, CreatePod, PromoteStandby, Remove
from pool.model.reasons import STANDBY_REMOVED
from pool.model.views import ExporterView, LeaseView, Observation, PodView
from pool.rules.buckets import Bucket
from pool.rules.planner import Plan, plan
from pool.rules.planreport import SetPlan, as_text
from pool.rules.stages.settle import FENCE_SETTLE
from pool.rules.stages.standby import HOLD, NEEDED
from pool.simulation.world import World
from tests.unit.test_reconciler_planner import condition, of
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready, standby

MATCH = {"matchLabels": {"board": "qemu"}}
LABELS = (("board", "qemu"), ("virtualtarget.jumpstarter.dev/exporterset", "pool"))


def observe(exporters: list[ExporterView], binding: str = "Immediate", **kw: Any) -> Observation:
    """The pool's Exporters, a Running Pod for each instance (none for a standby)."""
    own = ("leases", "expected_exporters")
    pods = tuple(PodView(e.name, e.name, "Running") for e in exporters if not e.standby)
    return Observation(
        pool=pool(**{k: v for k, v in kw.items() if k not in own}),
        klass=klass(binding),
        exporters=tuple(exporters),
        pods=pods,
        leases=tuple(kw.get("leases", ())),
        expected_exporters=frozenset(kw.get("expected_exporters", ())),
    )


def standbys(result: Plan) -> list[CreateExporter]:
    return [a for a in of(result, CreateExporter) if a.standby]


def test_a_first_consumer_pool_keeps_a_standby_and_no_instance() -> None:
    empty = plan(observe([], "WaitForFirstConsumer", min_available=0), T0)
    assert [(a.name, a.why) for a in of(empty, CreateExporter)] == [("pool-", NEEDED)]
    assert empty.standby == "+" and empty.desired == 0
    kept = plan(observe([standby()], "WaitForFirstConsumer", min_available=0), T0)
    assert kept.standby == "pool-s"
    assert not [a for a in kept.actions if not a.__class__.__name__.endswith(("Status", "Event"))]
    assert kept.buckets[Bucket.STANDBY] == 1 and kept.status["replicas"] == 0
    assert "standby Exporter pool-s keeps Leases pending" in condition(kept, "Available")["message"]


def test_a_lease_pending_on_the_standby_makes_it_the_instance() -> None:
    pending = LeaseView("lab-1", MATCH, created=T0)
    result = plan(
        observe([standby()], "WaitForFirstConsumer", min_available=0, leases=[pending]), T0
    )
    (promote,) = of(result, PromoteStandby)
    assert promote.name == "pool-s" and "pending leases 1" in promote.why
    assert not of(result, CreateExporter)  # no second Exporter: the standby is the instance
    # Once the cache shows it without its label, it is an instance like any: its Pod.
    promoted = replace(standby(), standby=False)
    after = plan(
        Observation(
            pool=pool(min_available=0),
            klass=klass("WaitForFirstConsumer"),
            exporters=(promoted,),
            leases=(pending,),
        ),
        T0,
    )
    assert of(after, CreatePod) == [CreatePod("pool-s")]
    assert not of(after, CreateExporter) and after.standby == ""


def test_the_last_instance_is_fenced_only_once_a_standby_exists() -> None:
    surplus = ready("pool-0")
    shape = {"min_available": 0, "cooldown": timedelta(0), "surplus_since": T0}
    first = plan(observe([surplus], **shape), T0)
    assert [a.standby for a in of(first, CreateExporter)] == [True]
    assert not of(first, Remove)
    assert [(w.action, w.reason) for w in first.waits if w.action] == [
        (Remove("pool-0", True), HOLD)
    ]
    second = plan(observe([surplus, standby()], **shape), T0)
    assert of(second, Remove) == [Remove("pool-0", True)] and not of(second, CreateExporter)
    fenced = replace(surplus, enabled=False, fenced=True, fenced_at=T0, fenced_for="ScaleDown: x")
    third = plan(observe([fenced, standby()], **shape), T0 + FENCE_SETTLE)
    assert of(third, Remove) == [Remove("pool-0", False)] and third.standby == "pool-s"


def test_an_instance_that_matches_makes_the_standby_go() -> None:
    result = plan(observe([ready("pool-0"), standby()], min_available=1), T0)
    (removed,) = of(result, Remove)
    assert (removed.name, removed.fence, removed.event) == ("pool-s", False, STANDBY_REMOVED)
    assert result.standby == ""
    # Instances being created (not in the cache yet) keep it until the cache shows them.
    booting_only = plan(observe([standby()], min_available=1, expected_exporters=["pool-x"]), T0)
    assert not of(booting_only, Remove) and booting_only.standby == "pool-s"


def test_a_standby_of_labels_the_template_no_longer_has_goes() -> None:
    old = replace(standby("pool-old"), labels=(("board", "arm"), *LABELS[1:]))
    current = replace(standby(), labels=LABELS)
    result = plan(observe([old, current], "WaitForFirstConsumer", min_available=0), T0)
    assert [r.name for r in of(result, Remove)] == ["pool-old"]
    assert result.standby == "pool-s" and not of(result, CreateExporter)


def test_the_ceiling_does_not_count_the_standby() -> None:
    one = {"min_replicas": 1, "max_replicas": 1, "min_available": 1}
    full = plan(observe([booting("pool-0"), standby()], **one), T0)
    assert not of(full, CreateExporter) and not of(full, PromoteStandby)
    assert not full.at_ceiling
    # At the ceiling with an outdated instance: the standby first, then its fence, and its
    # replacement is the standby made an instance once the old one has gone.
    old = replace(ready("pool-0"), revision="old")
    rolling = plan(observe([old], **one), T0)
    assert [a.standby for a in of(rolling, CreateExporter)] == [True]
    assert not of(rolling, Remove)
    fenced = plan(observe([old, standby()], **one), T0)
    assert of(fenced, Remove) == [Remove("pool-0", True)]
    replaced = plan(observe([standby()], **one), T0)
    assert [p.name for p in of(replaced, PromoteStandby)] == ["pool-s"]


def test_a_pool_at_zero_serves_every_lease_in_the_simulation() -> None:
    """The simulated lease controller ends a Lease as 0.9.0 does when no enabled Exporter
    matches: with the standby none is lost, and the pool goes back to no running instance."""
    world = World(
        pool=pool(min_available=0, cooldown=timedelta(0)),
        klass=klass("WaitForFirstConsumer"),
        boot=timedelta(seconds=30),
    )
    now = T0
    world.step(now)
    for n in range(3):
        world.request(f"l{n}", now, timedelta(minutes=2))
        for _ in range(12):
            now += timedelta(seconds=15)
            world.advance(now)
            world.step(now)
    for _ in range(20):
        now += timedelta(seconds=15)
        world.advance(now)
        world.step(now)
    assert world.lost == 0
    assert all(r.assigned is not None for r in world.requests.values())
    assert [i.standby for i in world.instances.values()] == [True]
    assert not world.pods


def test_virtualtarget_plan_says_what_the_standby_is_for() -> None:
    result = plan(observe([standby()], "WaitForFirstConsumer", min_available=0), T0)
    text = as_text([SetPlan("ns", "pool", "qemu", result)], "any namespace")
    assert "  standby   pool-s: no enabled instance: Leases pend on it, not end" in text
