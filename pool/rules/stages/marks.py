"""Planner stage, served marks and lease protection.

Where a release matters (ExitAndReplace, reclaimPolicy Retain), the first Lease seen on a
busy instance is written on it (SERVED_LEASE), so its release is recognised even when the
exporter does not record its lease hooks. Cheap, and harmless while the instance is busy.

A busy instance gets the lease protection finalizer (`pool.rules.protection`), in
the same write as its served mark when it needs that too; the verdicts are handed on to
the stage that takes protection off (`pool.rules.stages.release`). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pool.model.actions import Action, MarkServed, Protect
from pool.model.views import Observation
from pool.rules.buckets import Bucket
from pool.rules.protection import Verdict, busy_lease, verdict
from pool.rules.stages.census import Census
from pool.rules.steps import Steps

__all__ = ["Marks", "served_marks"]


@dataclass(slots=True)
class Marks:
    steps: Steps
    verdicts: Mapping[str, Verdict]  # each instance's protection, by name


def served_marks(obs: Observation, now: datetime, counted: Census) -> Marks:
    leased_by = counted.leased_by
    marks: dict[str, str] = {}
    if counted.release_served:
        for exporter in counted.members[Bucket.BUSY]:
            lease = exporter.lease_ref or leased_by.get(exporter.name, "")
            if lease and not exporter.served_lease:
                marks[exporter.name] = lease
    verdicts = {e.name: verdict(e, leased_by, busy_lease(e, leased_by), now) for e in obs.exporters}
    actions: list[Action] = []
    for exporter in obs.exporters:
        found = verdicts[exporter.name]
        served = marks.pop(exporter.name, "")
        if found.protect:
            actions.append(Protect(exporter.name, found.why, served))
        elif served:
            actions.append(MarkServed(exporter.name, served))
    return Marks(Steps(tuple(actions)), verdicts)
