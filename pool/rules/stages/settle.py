"""Planner stage, settle: no instance is deleted within FENCE_SETTLE of the pool's fence.

Jumpstarter's lease controller picks an Exporter from what its cache read: a pick made
before the fence can be written after the executor's live read of the Leases, and a
Lease naming a deleted Exporter goes with it (the Exporter owns it). So a removal takes
two passes, as in Jumpstarter's own exporter-set controller (disable an Exporter, delete a
disabled unleased one on the next pass): one fences (`Remove` with `fence`, carrying why
to the other in FENCED_FOR), and a pass at least FENCE_SETTLE later reads the Leases live
and deletes (`pool.rules.stages.departures`). A delete planned sooner waits, and
each fence asks for that pass. No I/O.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pool.model.actions import Action, Remove
from pool.model.timefmt import format_time
from pool.model.views import Observation
from pool.rules.steps import Steps, Wait, sooner

__all__ = ["FENCE_SETTLE", "settle"]

# Longer than a lease controller takes from reading an Exporter to writing its pick
# (milliseconds, seconds on a loaded machine); the price is this long on every removal.
FENCE_SETTLE = timedelta(seconds=2)


def settle(obs: Observation, now: datetime, steps: Steps) -> Steps:
    fenced_at = {e.name: e.fenced_at for e in obs.exporters if e.fenced}
    actions: list[Action] = []
    waits = list(steps.waits)
    requeue = steps.requeue
    for action in steps.actions:
        if isinstance(action, Remove):
            at = fenced_at.get(action.name)
            if action.fence:
                requeue = sooner(requeue, FENCE_SETTLE)
            elif at is not None and now < at + FENCE_SETTLE:
                due = at + FENCE_SETTLE
                why = f"fenced at {format_time(at)}: deleted once its fence has settled"
                waits.append(Wait(why, action, due))
                requeue = sooner(requeue, due - now)
                continue
        actions.append(action)
    return Steps(tuple(actions), tuple(waits), requeue)
