"""Planner stage, release: lease protection comes off an instance no lease holds any more,
unless this pass removes or retains it (that write takes it off). A deleted instance
that a lease still holds is kept until the lease ends, or at most `PROTECTION_BOUND`
after its deletion (`pool.rules.protection`); the pass waits saying so and runs
again at the bound. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pool.model.actions import Remove, Retain, Unprotect
from pool.model.views import Observation
from pool.rules.protection import Verdict
from pool.rules.steps import Steps, Wait, sooner

__all__ = ["release"]


def release(
    obs: Observation, now: datetime, verdicts: Mapping[str, Verdict], *earlier: Steps
) -> Steps:
    """`earlier`: the steps of the stages that remove or retain instances."""
    leaving = {a.name for part in earlier for a in part.actions if isinstance(a, Remove | Retain)}
    actions = []
    waits = []
    requeue = None
    for exporter in obs.exporters:
        found = verdicts[exporter.name]
        if found.release and exporter.name not in leaving:
            actions.append(Unprotect(exporter.name, found.why, found.warning))
        elif found.until is not None:
            waits.append(Wait(f"{exporter.name} is being deleted; {found.why}"))
            requeue = sooner(requeue, found.until - now)
    return Steps(tuple(actions), tuple(waits), requeue)
