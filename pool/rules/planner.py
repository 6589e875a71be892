"""The pool planner: one set's observed world and `now` in, the steps and status out.

Pure and deterministic (no I/O, no clock, no randomness): the runtime, the simulation,
the property tests and the benchmarks all call `plan` with the same inputs.

Each owned Exporter falls in one bucket (`pool.rules.buckets`). With
W = minAvailableReplicas (0 under WaitForFirstConsumer), Q = pending Leases that match
the labels an instance would carry, and M = maxReplicas (0 = no ceiling):

    desired  = min(max(minReplicas, busy + W + Q), M)
    capacity = busy + available + provisioning        (booting instances count)
    creates  = min(desired - capacity, M - owned)     (the ceiling counts every owned
                                                       object, draining and terminating too)

and a surplus (capacity - desired, never a busy instance) goes once it has lasted
`scaleDownCooldown`. A pool with no enabled instance keeps a standby Exporter without a
Pod, so that Jumpstarter's lease controller pends a Lease instead of ending it
(`pool.rules.stages.standby`). `plan` runs the stages of `pool.rules.stages` in order, each
with its rule in its docstring, and joins their steps in that order, the creates first.

Explanations: every step that changes the pool carries its reason (`why`, in the terms
of the rules: "warm buffer 2, available 0", "surplus since ..., cooldown 5m"), and
`Plan.waits` says what the pass holds back: the scale-down steps a cooldown delays, with
the moment they become due, a problem that stops scaling, the ceiling. The reconciler's
log and Events and `virtualtarget plan` print these words (`pool.rules.explain`),
so they always agree with what a pass does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pool.model.actions import Action
from pool.model.demand import DemandMemory
from pool.model.views import Observation
from pool.rules.buckets import Bucket
from pool.rules.demand import Estimate
from pool.rules.stages.census import census
from pool.rules.stages.demand import demand
from pool.rules.stages.departures import departures
from pool.rules.stages.failures import failures
from pool.rules.stages.marks import served_marks
from pool.rules.stages.notes import notes
from pool.rules.stages.release import release
from pool.rules.stages.rollout import rollout
from pool.rules.stages.scale_down import scale_down
from pool.rules.stages.scale_up import scale_up
from pool.rules.stages.settle import settle
from pool.rules.stages.size import size
from pool.rules.stages.standby import standby
from pool.rules.stages.status import status
from pool.rules.stages.upkeep import upkeep
from pool.rules.steps import Wait, join

__all__ = ["Plan", "plan"]


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    status: Mapping[str, object]
    desired: int
    buckets: Mapping[Bucket, int]
    pending_leases: int
    requeue_after: timedelta | None = None
    # instances whose config Secret (and other rendered objects) the runtime keeps current
    keep_current: tuple[str, ...] = ()
    awaiting: tuple[str, ...] = ()  # instances waiting for credentials
    warm: int = 0  # the warm buffer in force (0 under WaitForFirstConsumer)
    at_ceiling: bool = False  # more instances wanted than maxReplicas allows
    # running instances of an earlier revision: only their token is kept current (their
    # process keeps the configuration it started with; a new Pod brings the new one)
    keep_token: tuple[str, ...] = ()
    outdated: tuple[tuple[str, str], ...] = ()  # (instance, what its replacement waits for)

    @property
    def warm_shortfall(self) -> int:
        """How many warm instances the pool lacks now."""
        return max(0, self.warm - self.buckets.get(Bucket.AVAILABLE, 0))

    waits: tuple[Wait, ...] = ()
    demand: Estimate | None = None  # `warm-buffer: auto`: the buffer in force and why
    learned: DemandMemory | None = None  # and its memory as of this pass (`PoolView.learned`)
    standby: str = ""  # the standby Exporter kept after this pass ("+": being created)
    # leased instances on a lost node, kept while their lease lasts: (name, node, lease)
    stranded: tuple[tuple[str, str, str], ...] = ()


def plan(obs: Observation, now: datetime) -> Plan:
    """One pass over one pool: the stages in order, each given what earlier ones found."""
    counted = census(obs)
    failing = failures(obs, counted)
    asked = demand(obs, now)
    sized = size(obs, counted, asked)
    marked = served_marks(obs, now, counted)
    leaving = departures(obs, now, counted, failing)
    kept = upkeep(obs, counted)
    growth = scale_up(obs, now, counted, failing, sized, kept.withheld)
    rolling = rollout(obs, now, counted, failing, sized, len(growth.creates))
    shrink = scale_down(obs, now, counted, sized, rolling.surge, rolling.removing)
    released = release(obs, now, marked.verdicts, leaving, shrink.steps)
    scaling = rolling.note if rolling.note[0] else shrink.note if shrink.note[0] else growth.note
    told = notes(obs, counted, failing, sized, kept, scaling, growth.at_ceiling)
    if rolling.failing and told.degraded[0]:
        told.degraded = (told.degraded[0], f"{told.degraded[1]}; the rollout is stopped")
    written = status(obs, now, counted, sized, told)
    if kept.awaiting:  # a wait for credentials sets the next pass, whatever departures asked
        leaving = replace(leaving, requeue=None)
    joined = join(
        asked.steps,
        marked.steps,
        leaving,
        kept.steps,
        growth.steps,
        rolling.steps,
        shrink.steps,
        released,
        told.steps,
        written.steps,
    )
    kept_alive = standby(obs, counted, (*growth.creates, *rolling.creates), joined)
    steps = settle(obs, now, kept_alive.steps)
    return Plan(
        (*kept_alive.creates, *steps.actions),
        written.status,
        sized.desired,
        counted.count,
        sized.pending,
        steps.requeue,
        keep_current=tuple(n for n in kept.keep_current if n not in rolling.names),
        awaiting=kept.awaiting,
        warm=sized.warm,
        at_ceiling=growth.at_ceiling,
        waits=steps.waits,
        demand=asked.estimate,
        learned=asked.learned,
        keep_token=tuple(n for n in kept.keep_current if n in rolling.names),
        outdated=rolling.outdated,
        standby=kept_alive.name,
        stranded=counted.stranded,
    )
