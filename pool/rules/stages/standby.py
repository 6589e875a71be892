"""Planner stage, standby: a Lease the pool could serve always meets an enabled Exporter.

Jumpstarter 0.9.0's lease controller (`reconcileStatusExporterRef`) ends a new Lease at
once when no Exporter matches its selector (Unsatisfiable, NoAccess) or when every one
that matches is disabled (Unsatisfiable, AllDisabled). It pends one (Pending, Offline,
looked at again every second) while the Exporters that match are enabled but none is
online. So a pool with no enabled instance would lose every Lease that arrives: a
WaitForFirstConsumer pool or an Immediate one at zero, or one whose only instances are
fenced for a scale-down, a recycle or a rollout at its ceiling.

Such a pool keeps one standby: an Exporter with the template's labels and STANDBY_LABEL,
enabled, credentialed by Jumpstarter like any other, with no Pod. A Lease pends on it as
Offline, the pool counts that Lease as pending, and the first instance the pool then adds
is the standby itself (`PromoteStandby`: its label goes, its Pod follows). It is not an
instance: it holds no capacity, the ceiling does not count it, and no status counter
does; the Available condition names it.

- Kept while no enabled, not deleted instance carrying the template's labels (what a
  Lease for the pool selects) is left after this pass's fences (creates sent and not yet
  seen count as left).
- Made, when needed and missing, before any fence of the pass: those fences wait for the
  next pass (the standby's create reaches Jumpstarter's watch of Exporters before a later
  fence does: one resource, one order).
- Promoted in place of the pass's first create.
- Deleted once an instance the cache shows keeps Leases alive without it; one standby of
  labels the template no longer has is deleted at once.

A problem that stops scaling (a missing class, invalid parameters) does not stop this
stage: a Lease that pends on the standby is served once the pool is repaired. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pool.model.actions import Action, CreateExporter, PromoteStandby, Remove, Retain
from pool.model.keys import generate_name, instance_labels
from pool.model.reasons import STANDBY_REMOVED
from pool.model.views import ExporterView, Observation
from pool.rules.buckets import Bucket
from pool.rules.stages.census import Census
from pool.rules.steps import Steps, Wait

__all__ = ["HOLD", "NEEDED", "Standby", "standby"]

NEEDED = "no enabled instance left for a Lease to match (Jumpstarter 0.9.0 would end it)"
HOLD = (
    "fenced once the standby exists: Jumpstarter 0.9.0 ends a Lease whose Exporters "
    "are all disabled"
)


@dataclass(slots=True)
class Standby:
    creates: tuple[CreateExporter | PromoteStandby, ...]
    steps: Steps
    name: str = ""  # the standby the pool keeps after this pass ("+" while it is created)


def _fences(action: Action) -> bool:
    return isinstance(action, Retain) or (isinstance(action, Remove) and action.fence)


def standby(
    obs: Observation, counted: Census, creates: tuple[CreateExporter, ...], steps: Steps
) -> Standby:
    labels = instance_labels(obs.pool.name, obs.pool.template_labels)
    members = counted.members[Bucket.STANDBY]
    current = [e for e in members if e.carries(labels)]
    stale = [e for e in members if not e.carries(labels)]
    leaving = {a.name for a in steps.actions if isinstance(a, (Remove, Retain))}
    # What a Lease selects is the template's labels: an instance adopted without ours
    # (from Jumpstarter's own exporter-set controller) keeps Leases alive all the same.
    selected = obs.pool.template_labels
    alive = [
        e
        for e in obs.exporters
        if e.enabled and not e.deleting and not e.standby and e.carries(selected)
        if e.name not in leaving
    ]
    adding: list[CreateExporter | PromoteStandby] = list(creates)
    if current and adding:
        first, promoted = adding[0], current.pop(0)
        why = f"{first.why}; the standby becomes the instance"
        adding[0] = PromoteStandby(promoted.name, why, first.revision, first.step)
        alive.append(promoted)
    actions, waits = list(steps.actions), list(steps.waits)
    removals = [_remove(counted, e, "its labels are no longer the template's") for e in stale]
    kept = ""
    if not alive and not counted.expected and len(adding) == 0:
        if current:
            kept = current.pop(0).name
        else:
            name = generate_name(obs.pool.name)
            adding.append(CreateExporter(name, NEEDED, 0, counted.revision, standby=True))
            kept = "+"
            held = [a for a in actions if _fences(a)]
            actions = [a for a in actions if not _fences(a)]
            waits += [Wait(HOLD, a) for a in held]
    if alive:  # an instance the cache shows matches: no standby needed
        why = f"{len(alive)} enabled instance(s) match without it"
        removals += [_remove(counted, e, why) for e in current]
    elif current:  # instances are being created: keep one until the cache shows them
        kept = kept or current.pop(0).name
        removals += [_remove(counted, e, "one standby is enough") for e in current]
    out = Steps((*removals, *actions), tuple(waits), steps.requeue)
    return Standby(tuple(adding), out, kept)


def _remove(counted: Census, exporter: ExporterView, why: str) -> Remove:
    """A standby has no Pod and no Lease can hold it (never online): deleted at once."""
    return replace(counted.remove(exporter, False, f"standby: {why}"), event=STANDBY_REMOVED)
