"""Property test of rollouts: random pools, leases, revisions, pauses and interleavings
through the real planner in the simulated world (`pool.simulation.world`).

After every pass: a busy instance is never removed, a create never takes the pool over
maxReplicas, a rollout's removal leaves the warm buffer met whenever a surge fits, and
scale-down takes a current instance only once every idle outdated one goes.
At the end, once no lease holds an instance and nothing pauses the rollout, every
instance is on the current revision.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pool.model.actions import CreateExporter, PromoteStandby, Remove, Retain
from pool.model.reasons import SCALE_DOWN
from pool.rules.buckets import Bucket
from pool.rules.planner import Plan
from pool.rules.rollout import current_revisions
from pool.simulation.world import World
from tests.unit.test_reconciler_properties import apply_event as pool_event
from tests.unit.test_reconciler_support import T0, klass, pool

MINUTE = timedelta(minutes=1)

events = st.one_of(
    st.tuples(st.just("request"), st.integers(1, 30)),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("revise"), st.integers(0, 3)),
    st.tuples(st.just("pause"), st.booleans()),
    st.tuples(st.just("tick"), st.integers(1, 5)),
    st.tuples(st.just("crash"), st.integers(0, 2)),
)

worlds = st.builds(
    lambda lo, hi, warm, recycle, boot, binding: World(
        pool=pool(
            min_replicas=min(lo, hi) if hi else lo,
            max_replicas=hi,
            min_available=min(warm, hi) if hi else warm,
            cooldown=timedelta(minutes=3),
            recycle=recycle,
            revision="r0",
        ),
        klass=klass(binding),
        boot=timedelta(minutes=boot),
    ),
    st.integers(0, 3),
    st.integers(0, 5),
    st.integers(0, 4),
    st.sampled_from(["ExitAndReplace", "InPlaceReuse"]),
    st.integers(1, 3),
    st.sampled_from(["Immediate", "WaitForFirstConsumer"]),
)


def check(world: World, busy: dict[str, bool | None], ready: set[str], result: Plan) -> None:
    owned = sum(1 for b in busy.values() if b is not None)
    ceiling, warm = world.pool.max_replicas, result.warm
    assert world.lost == 0, "a Lease ended for want of an enabled Exporter"
    creates = [
        a
        for a in result.actions
        if isinstance(a, PromoteStandby) or (isinstance(a, CreateExporter) and not a.standby)
    ]
    if ceiling:
        assert owned + len(creates) <= ceiling, "a create would exceed maxReplicas"
    available = result.buckets[Bucket.AVAILABLE]
    for action in result.actions:
        if isinstance(action, Remove | Retain):
            assert not busy[action.name], f"busy {action.name} chosen for removal"
        if isinstance(action, Remove) and action.fence and action.why.startswith("outdated"):
            surge_fits = not ceiling or owned < ceiling
            if surge_fits and action.name in ready:
                assert available - 1 >= warm, f"removing {action.name} breaks the warm buffer"
    _outdated_go_first(result)


def _outdated_go_first(result: Plan) -> None:
    """Scale-down takes a current instance only once every idle outdated one goes."""
    settling = (w.action for w in result.waits)  # fenced, the delete waits for the settle
    removed = {a.name for a in (*result.actions, *settling) if isinstance(a, Remove)}
    # the decisions: a fence; the delete a later pass makes of it follows from it
    shrunk = {
        a.name
        for a in result.actions
        if isinstance(a, Remove) and a.fence and a.event == SCALE_DOWN
    }
    outdated = dict(result.outdated)  # every outdated instance that stays, and what it awaits
    if shrunk - outdated.keys():  # a current instance goes
        idle = {name for name, why in outdated.items() if not why.startswith("its lease")}
        assert idle <= removed, f"current instances go before outdated {idle - removed}"


def before(world: World) -> tuple[dict[str, bool | None], set[str]]:
    """Which Exporters are busy (None: a standby, no instance), and which ready, before a
    pass."""
    busy = {name: None if i.standby else world.busy(name) for name, i in world.instances.items()}
    return busy, {n for n, i in world.instances.items() if i.registered and i.online}


def apply_event(world: World, event: tuple[Any, ...], now: Any, serial: int) -> Any:
    """Template edits and pauses here; leases and time as the pool's property test plays them."""
    if event[0] == "revise":  # a template edit (or an edit back to an earlier revision)
        world.pool = replace(world.pool, revision=f"r{event[1]}")
    elif event[0] == "pause":
        world.pool = replace(world.pool, rollout_paused=event[1])
    else:
        now = pool_event(world, event, now, serial)
    return now


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds, script=st.lists(events, max_size=40))
def test_rollouts_keep_leases_and_bounds_and_finish(world: World, script: list[Any]) -> None:
    now = T0
    world.step(now)  # the pool's first pass: before it, no Exporter of it exists
    for serial, event in enumerate(script):
        now = apply_event(world, event, now, serial)
        world.advance(now)
        busy, ready = before(world)
        crash = event[1] if event[0] == "crash" else None
        result = world.step(now, crash_after=crash)
        if crash is None:
            check(world, busy, ready, result)

    world.pool = replace(world.pool, rollout_paused=False)
    for request in list(world.requests.values()):
        if not request.ended:
            world.release(request.name)
    end = now + 20 * world.boot + 60 * MINUTE
    while now < end:
        now += MINUTE
        world.advance(now)
        busy, ready = before(world)
        check(world, busy, ready, world.step(now))

    current = current_revisions(world.pool, world.klass)
    # A standby renders nothing (no Pod): its promotion stamps the revision of the day.
    stale = {
        n: i.revision
        for n, i in world.instances.items()
        if i.revision not in current and not i.standby
    }
    assert not stale, f"outdated after the rollout: {stale}"
    final = world.step(now)
    assert final.outdated == () and final.actions == (), f"still acting: {final.actions}"
