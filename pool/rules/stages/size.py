"""Planner stage, size: how many instances the pool wants (docs/design.md §4).

With W = minAvailableReplicas (the warm buffer; 0 under WaitForFirstConsumer, which
keeps none and scales on pending Leases), Q = Leases that have not ended, have no
exporter yet and whose selector matches the labels an instance would carry, and
M = maxReplicas (0 = no ceiling):

    desired  = min(max(minReplicas, busy + W + Q), M)
    capacity = busy + available + provisioning        (booting instances count, or the
                                                       pool over-creates while they boot)

A Lease an owned Exporter already names in its leaseRef is served, not pending, even while
the Lease's own exporterRef has not reached this cache (two watches, either may lead):
counted as both busy and pending, it made the pool create one instance too many. A Lease
more than one set could serve is counted by its claimant alone, the oldest
(`pool.rules.claims`). A Lease booked for later counts from its beginTime less the
pool's boot time (`pool.rules.stages.demand`), and a pool with `warm-buffer: auto`
keeps the buffer its demand asks for, never below minAvailableReplicas, as W. The
ceiling counts every owned object, draining and terminating included, and the creates
the cache has not shown yet, but for the standby Exporter (`pool.rules.stages.standby`),
which is no instance, and the instances lost with their node, which never come back: a
lost instance never holds its own replacement back. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from pool.model.views import Observation
from pool.rules.buckets import Bucket
from pool.rules.stages.census import Census
from pool.rules.stages.demand import Demand

__all__ = ["Size", "size"]


@dataclass(slots=True)
class Size:
    pending: int  # Q
    warm: int  # W in force
    wffc: bool  # WaitForFirstConsumer
    ceiling: int  # M, 0 = none
    wanted: int  # before the ceiling
    desired: int
    capacity: int
    owned: int  # what the ceiling counts
    why_warm: str = ""  # why W is what it is, when the pool sizes it from demand

    @property
    def blocked(self) -> bool:
        """More instances wanted than maxReplicas allows."""
        return self.ceiling > 0 and self.wanted > self.ceiling


def size(obs: Observation, counted: Census, asked: Demand) -> Size:
    pool, count = obs.pool, counted.count
    serving = {e.lease_ref for e in obs.exporters if e.lease_ref}
    pending = sum(
        1
        for lease in asked.claimed
        if not lease.ended
        and not lease.exporter
        and lease.name not in serving
        and lease.name not in asked.deferred
    )
    wffc, sized = asked.wffc, asked.estimate
    warm = 0 if wffc else sized.buffer if sized is not None else pool.min_available
    ceiling = pool.max_replicas
    wanted = max(pool.min_replicas, count[Bucket.BUSY] + warm + pending)
    desired = min(wanted, ceiling) if ceiling else wanted
    capacity = count[Bucket.BUSY] + count[Bucket.AVAILABLE] + count[Bucket.PROVISIONING]
    owned = len(obs.exporters) - count[Bucket.STANDBY] - count[Bucket.LOST] + len(counted.expected)
    why = sized.reason() if sized is not None else ""
    return Size(pending, warm, wffc, ceiling, wanted, desired, capacity, owned, why)
