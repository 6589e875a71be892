"""Planner stage, demand: when a scheduled Lease counts, and, for a pool with
`warm-buffer: auto`, the warm buffer its demand asks for (`pool.rules.demand`).

- Every pool: a pending Lease whose `spec.beginTime` lies further ahead than the pool's
  boot time (the p95 of the boots it has seen, its `boot-estimate` until then) is not
  demand yet: it counts from beginTime minus the boot time, so an instance is warm when
  the lease begins and not hours before. The pass waits for that moment, naming the Lease,
  and runs again then.
- A pool with `warm-buffer: auto`: its memory (DEMAND) learns the arrivals of the Leases
  it counts (those booked for later are not arrivals: they count at their time) and the
  boots of its instances; the buffer in force is the estimator's, never below
  `minAvailableReplicas`. The memory is written at most once a minute (the first time at
  once), with an Event when the buffer in force changed; while a rate remains the pass
  runs again after a minute or a quarter of the demand window, whichever is sooner, so
  the buffer falls as the rate decays. Between two writes the pass starts from what
  the previous one learned (`PoolView.learned`, kept by the runtime), not from the memory
  and the Leases still there: an ended Lease goes with its recycled Exporter, often
  within the minute, and its arrival must not go with it. Under a WaitForFirstConsumer
  class, which keeps no instance warm, the annotation has no effect (the webhook warns of
  it): no buffer is sized, no memory written.

A pool without the annotation keeps `minAvailableReplicas` and writes no memory. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from pool.model.actions import RecordEvent, RememberDemand
from pool.model.demand import DemandMemory
from pool.model.keys import instance_labels
from pool.model.reasons import WARM_BUFFER_CHANGED
from pool.model.timefmt import format_time
from pool.model.views import BindingMode, LeaseView, Observation, PoolClaim
from pool.rules.claims import counts_lease
from pool.rules.demand import Estimate, advance, boot_p95, estimate
from pool.rules.steps import Steps, Wait

__all__ = ["WRITE_EVERY", "Demand", "demand"]

WRITE_EVERY = timedelta(minutes=1)
_NO_RATE = 1e-6  # leases a second below which an auto pool stops waking up to decay it


@dataclass(slots=True)
class Demand:
    claimed: tuple[LeaseView, ...]  # the Leases this pool counts, any state
    boot: timedelta  # the pool's boot time: p95 seen, else its estimate
    deferred: frozenset[str]  # pending Leases not counted yet (booked for later)
    wffc: bool  # the class binds WaitForFirstConsumer: no warm buffer, auto or not
    estimate: Estimate | None = None  # auto pools: the buffer in force and why
    steps: Steps = field(default_factory=Steps)
    learned: DemandMemory | None = None  # auto pools: the memory as of this pass


def demand(obs: Observation, now: datetime) -> Demand:
    pool, settings, klass = obs.pool, obs.pool.sizing, obs.klass
    wffc = klass is not None and klass.binding_mode == BindingMode.WAIT_FOR_FIRST_CONSUMER
    auto = settings.auto and not wffc
    me = PoolClaim(pool.name, pool.created, instance_labels(pool.name, pool.template_labels))
    claimed = tuple(lease for lease in obs.leases if counts_lease(lease.selector, me, obs.rivals))
    memory = _learned(obs, claimed, now) if auto else pool.demand
    boot = boot_p95(memory.boots if memory else _boots_seen(obs), settings.boot_estimate)
    later = [lease for lease in claimed if _later(lease, boot, now)]
    waits = tuple(
        Wait(
            f"scheduled lease {lease.name} begins at {format_time(lease.begin)}; "
            f"counted from then less boot time {boot.total_seconds():g}s",
            at=lease.begin - boot,
        )
        for lease in later
        if lease.begin is not None
    )
    deferred = frozenset(lease.name for lease in later)
    requeue = min((w.at - now for w in waits if w.at is not None), default=None)
    if memory is None or not auto:
        return Demand(claimed, boot, deferred, wffc, None, Steps((), waits, requeue))
    sized = estimate(memory, settings.boot_estimate, settings.target_wait, pool.min_available,
                     pool.max_replicas)  # fmt: skip
    memory = replace(memory, buffer=sized.buffer)
    actions = _remember(obs, now, memory, sized)
    if sized.rate > _NO_RATE:  # run again as the rate decays: a quarter of its window
        again = min(WRITE_EVERY, settings.demand_window / 4)
        requeue = min(requeue, again) if requeue is not None else again
    return Demand(claimed, boot, deferred, wffc, sized, Steps(actions, waits, requeue), memory)


def _later(lease: LeaseView, boot: timedelta, now: datetime) -> bool:
    """Pending, and booked for further ahead than one boot time."""
    pending = not lease.ended and not lease.exporter
    return pending and lease.begin is not None and lease.begin - boot > now


def _boots_seen(obs: Observation) -> tuple[float, ...]:
    """Boot times of the pool's instances now (a pool without memory)."""
    return tuple(seconds for _, seconds in _boots(obs))


def _boots(obs: Observation) -> list[tuple[datetime, float]]:
    return [
        (e.registered_at, (e.registered_at - e.created).total_seconds())
        for e in obs.exporters
        if e.registered and e.registered_at is not None and e.registered_at >= e.created
    ]


def _learned(obs: Observation, claimed: tuple[LeaseView, ...], now: datetime) -> DemandMemory:
    """The pool's memory advanced to the last whole second before `now` (a Lease created
    in this second is learned at the next pass). Without memory the pool starts from the
    Leases still there, as far back as its demand window; with one, from the later of it
    and what the last pass learned."""
    pool = obs.pool
    until = now.replace(microsecond=0) - timedelta(seconds=1)
    known = [m for m in (pool.demand, pool.learned) if m is not None]
    start = max(known, key=lambda m: m.at, default=None) or DemandMemory(
        until - pool.sizing.demand_window, buffer=pool.min_available
    )
    arrivals = [
        lease.created
        for lease in claimed
        if lease.created is not None and (lease.begin is None or lease.begin <= lease.created)
    ]
    return advance(start, arrivals, _boots(obs), until, pool.sizing.demand_window)


def _remember(
    obs: Observation, now: datetime, memory: DemandMemory, sized: Estimate
) -> tuple[RememberDemand | RecordEvent, ...]:
    """The memory write when one is due, and an Event when the buffer changed."""
    held = obs.pool.demand
    if held is not None and (now - held.at < WRITE_EVERY or _settled(held, memory)):
        return ()
    write = RememberDemand(memory, sized.reason())
    before = held.buffer if held is not None else obs.pool.min_available
    if sized.buffer == before:
        return (write,)
    change = f"warm buffer {before} -> {sized.buffer}: {sized.reason()}"
    return write, RecordEvent(WARM_BUFFER_CHANGED, change)


def _settled(held: DemandMemory, learned: DemandMemory) -> bool:
    """Nothing worth a write: no rate left, and the same boots and buffer."""
    quiet = held.rate <= _NO_RATE and learned.rate <= _NO_RATE
    return quiet and held.boots == learned.boots and held.buffer == learned.buffer
