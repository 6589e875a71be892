"""Property tests: random pools and event sequences through the real planner.

`pool.simulation.world.World` plays the cluster (kubelet, exporter processes, the lease
controller, the runtime's idempotent steps); hypothesis picks the events: leases taken
and released, instances going offline and online or owing a hook, parameters edited,
crashes part-way through a plan, restarts (a fresh planner pass with no memory but the
objects). Checked after every pass: the ceiling is never exceeded by a create, a busy
instance is never chosen for removal, the cooldown holds; at the end the pool converges
to the desired count and a constant world yields no further steps.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from api.warmbuffer import WarmBufferSettings
from pool.model.actions import CreateExporter, PromoteStandby, Remove, Retain
from pool.model.views import HookRecord
from pool.rules.buckets import Bucket
from pool.rules.planner import Plan, plan
from pool.simulation.world import World
from tests.unit.test_reconciler_support import T0, klass, pool

MINUTE = timedelta(minutes=1)

events = st.one_of(
    st.tuples(st.just("request"), st.integers(1, 30)),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("offline"), st.integers(0, 9)),
    st.tuples(st.just("owe"), st.integers(0, 9)),
    st.tuples(st.just("settle"), st.integers(0, 9)),
    st.tuples(st.just("edit"), st.integers(0, 3), st.integers(0, 6), st.integers(0, 4)),
    st.tuples(st.just("cooldown"), st.integers(0, 10)),
    st.tuples(st.just("tick"), st.integers(1, 15)),
    st.tuples(st.just("crash"), st.integers(0, 3)),
    st.tuples(st.just("restart"), st.just(0)),
    st.tuples(st.just("break"), st.booleans()),
)

# `auto`: the warm buffer sized from demand, with a short demand window so that a quiet
# world settles within the test's horizon.
SIZED = WarmBufferSettings(auto=True, boot_estimate=timedelta(minutes=2), demand_window=MINUTE)

worlds = st.builds(
    lambda lo, hi, warm, cool, recycle, binding, reclaim, auto: World(
        pool=pool(
            min_replicas=min(lo, hi) if hi else lo,
            max_replicas=hi,
            min_available=min(warm, hi) if hi else warm,
            cooldown=timedelta(minutes=cool),
            recycle=recycle,
            sizing=SIZED if auto else WarmBufferSettings(),
        ),
        klass=klass(binding, reclaim),
        boot=timedelta(minutes=2),
    ),
    st.integers(0, 3),
    st.integers(0, 6),
    st.integers(0, 4),
    st.integers(0, 10),
    st.sampled_from(["ExitAndReplace", "InPlaceReuse"]),
    st.sampled_from(["Immediate", "WaitForFirstConsumer"]),
    st.sampled_from(["Delete", "Retain"]),
    st.booleans(),
)


class Checker:
    """Tracks since when the pool has had a surplus, as the planner must."""

    def __init__(self) -> None:
        self.surplus_from: Any = None
        self.standbys: set[str] = set()  # the standby Exporters before the pass

    def before(self, world: World) -> dict[str, bool]:
        """Which instances are busy before a pass (and which Exporters are standbys)."""
        self.standbys = {n for n, i in world.instances.items() if i.standby}
        return busy_map(world)

    def check(self, world: World, before: dict[str, bool], result: Plan, now: Any) -> None:
        standbys = {n for n, i in world.instances.items() if i.standby}
        owned, ceiling = len(set(before) - self.standbys), world.pool.max_replicas
        assert world.lost == 0, "a Lease ended for want of an enabled Exporter"
        assert len(standbys) <= 1, f"standbys {sorted(standbys)}"
        creates = [
            a
            for a in result.actions
            if isinstance(a, PromoteStandby) or (isinstance(a, CreateExporter) and not a.standby)
        ]
        # The standby is not scaling: it keeps Leases alive, made and removed under a problem
        # too (pool.rules.stages.standby).
        if world.problem is not None:
            scaling = [
                a
                for a in result.actions
                if isinstance(a, Remove | Retain) and a.name not in self.standbys
            ]
            assert not creates and not scaling, "scaled while broken"
        if creates and ceiling:
            assert owned + len(creates) <= ceiling, "a create would exceed maxReplicas"
        for action in result.actions:
            if isinstance(action, Remove | Retain):
                assert not before[action.name], f"busy {action.name} chosen for removal"
        buckets = result.buckets
        capacity = buckets[Bucket.BUSY] + buckets[Bucket.AVAILABLE] + buckets[Bucket.PROVISIONING]
        surplus = min(
            capacity - result.desired, buckets[Bucket.AVAILABLE] + buckets[Bucket.PROVISIONING]
        )
        if surplus > 0 and world.problem is None:
            self.surplus_from = self.surplus_from or now
            if len([a for a in result.actions if isinstance(a, Remove) and a.fence]) > (
                buckets[Bucket.RELEASED] + buckets[Bucket.TERMINATING]
            ):
                assert now - self.surplus_from >= world.pool.cooldown, "scaled down early"
        else:
            self.surplus_from = None


def apply_event(world: World, event: tuple[Any, ...], now: Any, serial: int) -> Any:
    kind = event[0]
    names = sorted(world.instances)
    pick = names[event[1] % len(names)] if names and kind in ("offline", "owe", "settle") else None
    if kind == "request":
        world.request(f"l{serial}", now, event[1] * MINUTE)
    elif kind == "release":
        active = sorted(r.name for r in world.requests.values() if r.exporter and not r.ended)
        if active:
            world.release(active[event[1] % len(active)])
    elif kind == "offline" and pick:
        world.instances[pick].online = not world.instances[pick].online
    elif kind == "owe" and pick:
        inst = world.instances[pick]
        inst.records_hooks, inst.hooks = True, HookRecord("old", "u", "Succeeded", "Running")
    elif kind == "settle" and pick and world.instances[pick].hooks is not None:
        inst = world.instances[pick]
        inst.hooks = replace(inst.hooks, after_phase="Succeeded")  # type: ignore[arg-type]
    elif kind == "edit":
        lo, hi, warm = event[1], event[2], event[3]
        world.pool = replace(
            world.pool,
            generation=world.pool.generation + 1,
            min_replicas=min(lo, hi) if hi else lo,
            max_replicas=hi,
            min_available=min(warm, hi) if hi else warm,
        )
    elif kind == "cooldown":
        world.pool = replace(world.pool, cooldown=event[1] * MINUTE)
    elif kind == "tick":
        now += event[1] * MINUTE
    elif kind == "break":  # class deleted / parameters made invalid, or repaired
        world.problem = (
            ("InvalidParameters", "spec.parameters.resources.cpu: too many") if event[1] else None
        )
    return now


def busy_map(world: World) -> dict[str, bool]:
    return {name: world.busy(name) for name in world.instances}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds, script=st.lists(events, max_size=40))
# Once found at random: a surplus that lasted through a broken class must not let the
# pool scale down the moment the class is repaired.
@example(
    world=World(
        pool=pool(min_replicas=0, max_replicas=0, min_available=1, cooldown=MINUTE),
        klass=klass("Immediate", "Delete"),
        boot=timedelta(minutes=2),
    ),
    script=[("request", 1), ("edit", 0, 0, 0), ("break", True)],
)
# Once found at random: a scale-down to zero that made a standby and waited a pass to fence
# the instance, then a problem that stopped it; the instance stays, so the standby goes.
@example(
    world=World(
        pool=pool(min_replicas=0, max_replicas=0, min_available=1, cooldown=MINUTE),
        klass=klass("Immediate", "Delete"),
        boot=timedelta(minutes=2),
    ),
    script=[("edit", 0, 0, 0), ("cooldown", 0), ("break", True)],
)
def test_pool_invariants_hold_and_the_pool_converges(world: World, script: list[Any]) -> None:
    checker = Checker()
    now = T0
    world.step(now)  # the pool's first pass: before it, no Exporter of it exists
    for serial, event in enumerate(script):
        now = apply_event(world, event, now, serial)
        world.advance(now)
        before = checker.before(world)
        crash = event[1] if event[0] == "crash" else None
        result = world.step(now, crash_after=crash)
        if crash is None:
            checker.check(world, before, result, now)

    # No more demand: leases run out, instances boot, cooldowns pass, the class is repaired.
    world.problem = None
    for request in list(world.requests.values()):
        if not request.ended:
            world.release(request.name)
    horizon = world.pool.cooldown + 10 * world.boot + 30 * MINUTE
    end = now + horizon
    while now < end:
        now += MINUTE
        world.advance(now)
        before = checker.before(world)
        checker.check(world, before, world.step(now), now)

    final = world.step(now)
    buckets = final.buckets
    capacity = buckets[Bucket.BUSY] + buckets[Bucket.AVAILABLE] + buckets[Bucket.PROVISIONING]
    assert capacity == final.desired or (
        capacity > final.desired and buckets[Bucket.AVAILABLE] + buckets[Bucket.PROVISIONING] == 0
    ), f"not converged: {dict(buckets)} desired {final.desired}"
    assert buckets[Bucket.RELEASED] == buckets[Bucket.TERMINATING] == 0
    assert final.actions == (), f"constant world still acts: {final.actions}"
    assert world.step(now + 7 * MINUTE).actions == (), "flapping after time passes"


@settings(max_examples=40, deadline=None)
@given(world=worlds, lag=st.integers(1, 4), passes=st.integers(1, 6))
def test_plans_from_a_lagging_cache_never_duplicate(world: World, lag: int, passes: int) -> None:
    """Plans made from an old observation (a lagging cache) create no extras: the creates
    the runtime made and the cache does not show yet are expected (the runtime's
    expectations, `reconciler.runtime.expectations`), and names are generated, never replayed."""
    now = T0
    stale = world.observe()
    created: set[str] = set()
    for _ in range(passes):
        before = set(world.instances)
        for action in plan(replace(stale, expected_exporters=frozenset(created)), now).actions:
            world.apply(action, now)
        created |= set(world.instances) - before
        now += lag * MINUTE
    world.advance(now)
    result = world.step(now)
    buckets = result.buckets
    capacity = buckets[Bucket.BUSY] + buckets[Bucket.AVAILABLE] + buckets[Bucket.PROVISIONING]
    assert capacity <= max(result.desired, 0) or not world.instances
    assert not [a for a in result.actions if isinstance(a, CreateExporter)]
    assert sum(1 for i in world.instances.values() if i.standby) <= 1
