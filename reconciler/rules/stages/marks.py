"""Stage 4, served marks: where a release matters (ExitAndReplace, reclaimPolicy Retain),
the first Lease seen on a busy instance is written on it (SERVED_LEASE), so its release
is recognised even when the exporter does not record its lease hooks. Cheap, and
harmless while the instance is busy. No I/O.
"""

from __future__ import annotations

from reconciler.model.actions import MarkServed
from reconciler.rules.buckets import Bucket
from reconciler.rules.stages.census import Census
from reconciler.rules.steps import Steps

__all__ = ["served_marks"]


def served_marks(counted: Census) -> Steps:
    if not counted.release_served:
        return Steps()
    marks = []
    for exporter in counted.members[Bucket.BUSY]:
        lease = exporter.lease_ref or counted.leased_by.get(exporter.name, "")
        if lease and not exporter.served_lease:
            marks.append(MarkServed(exporter.name, lease))
    return Steps(tuple(marks))
