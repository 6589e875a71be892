"""Planner stage, scale up: create the instances the pool lacks, as many as the ceiling allows.

    creates = min(desired - capacity, M - owned)      (M = maxReplicas; none: no limit)

Room held by instances on their way out (a failed one waiting out its delay, a released
one) comes back by itself: maxReplicas limits nothing there. An image the allow-list
refuses creates nothing. A failing pool (`pool.rules.stages.failures`) creates one
probe instance at a time, once the backoff's delay is over, carrying its failures in a
row (BACKOFF_STEP) and the revision it renders (REVISION); at the ceiling the probe
follows in the pass after the removal that makes room.

Instance names are never reused: an Exporter is created with `generateName: <set>-`, as
Jumpstarter's controller names them, so nothing of an earlier instance (a Pod still
terminating on its node, a Secret not yet collected) shares a new one's name. The creates
go first in the plan: a replacement's boot is what a lease may be waiting for, and every
other step of the pass can follow it. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pool.model.actions import CreateExporter
from pool.model.keys import generate_name
from pool.model.reasons import SCALING_UP
from pool.model.views import Observation, PoolView
from pool.rules.buckets import Bucket
from pool.rules.stages.census import Census
from pool.rules.stages.failures import Failing
from pool.rules.stages.size import Size
from pool.rules.stages.upkeep import refused_images
from pool.rules.steps import Steps, Wait

__all__ = ["Growth", "scale_up"]


@dataclass(slots=True)
class Growth:
    creates: tuple[CreateExporter, ...] = ()
    steps: Steps = field(default_factory=Steps)  # what holds creates back
    note: tuple[str, str] = ("", "")  # (reason, message) for Progressing
    at_ceiling: bool = False  # more instances wanted than maxReplicas allows


def scale_up(
    obs: Observation, now: datetime, counted: Census, failing: Failing, sized: Size, withheld: int
) -> Growth:
    if obs.problem is not None:
        return Growth(at_ceiling=sized.blocked)
    deficit = sized.desired - sized.capacity
    room = sized.ceiling - sized.owned if sized.ceiling else deficit
    creates = max(0, min(deficit, room))
    waits = []
    refused = refused_images(obs)
    if refused and (creates or withheld):
        waits.append(Wait(refused))
        creates = 0
    at_ceiling = sized.blocked or bool(sized.ceiling and deficit > room + counted.leaving)
    step, requeue, backoff = 0, None, failing.backoff
    if creates and (backoff is not None or failing.probing):
        # Failing: one probe instance at a time, once the delay is over.
        due = backoff is None or now >= backoff.retry_at
        creates = 1 if due and not failing.probing else 0
        if backoff is not None:
            step = backoff.failures
            if not due:
                requeue = backoff.retry_at - now
    held = Steps(waits=tuple(waits), requeue=requeue)
    if not creates:
        return Growth(steps=held, at_ceiling=at_ceiling)
    why = _shortfall(obs.pool, counted.count, sized.warm, sized.pending)
    if creates < deficit:
        why += f", room for {creates} under maxReplicas {sized.ceiling}"
    elif sized.desired < sized.wanted:
        why += f", capped at maxReplicas {sized.ceiling}"
    if step:
        why += f"; probe after {step} failure(s) in a row"
    new = (CreateExporter(generate_name(obs.pool.name), why, step, counted.revision),) * creates
    note = (SCALING_UP, f"creating {creates} instance(s) towards {sized.desired}")
    return Growth(new, held, note, at_ceiling)


def _shortfall(pool: PoolView, count: Mapping[Bucket, int], warm: int, pending: int) -> str:
    """Why the pool needs more instances, in the terms that set `desired`: the floor, or
    the warm buffer and pending leases against what is ready or booting (busy instances
    count on both sides of that comparison, so they are left out)."""
    busy = count[Bucket.BUSY]
    if pool.min_replicas > busy + warm + pending:
        terms = [f"minReplicas {pool.min_replicas}"] + ([f"busy {busy}"] if busy else [])
    else:
        terms = [f"warm buffer {warm}"] if warm or not pending else []
        terms += [f"pending leases {pending}"] if pending else []
    terms.append(f"available {count[Bucket.AVAILABLE]}")
    if count[Bucket.PROVISIONING]:
        terms.append(f"provisioning {count[Bucket.PROVISIONING]}")
    return ", ".join(terms)
