"""Which pool counts a pending Lease when several could serve it. Pure: no I/O.

A pending Lease is one pool's demand only: a pool counts it (`desired` grows by one) when
the Lease's selector matches the labels the pool's instances carry AND the pool is the
Lease's claimant, the oldest of the namespace's ExporterSets (not being deleted) whose
instance labels the selector matches: smallest `creationTimestamp`, then smallest name.
Every replica and every pool computes this from the same objects, so one Lease never
makes two pools create an instance each.

A set as the rule sees it is a `pool.model.views.PoolClaim`
(`pool.model.adapt.pool_claim` reads one from the raw object). Two sets overlap
when the selector of either matches the instance labels of the other: a Lease written
for one of them can then match both. The webhook warns about it (`webhook.pools`),
naming the set that would count such a Lease.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from api.labels import selector_matches
from pool.model.views import PoolClaim

__all__ = ["claimant", "counts_lease", "matches", "overlap"]


def matches(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str], *, unreadable: bool = False
) -> bool:
    """Whether `selector` matches `labels`; one no one can read matches nothing, or
    everything with `unreadable` (when it only decides whom to wake)."""
    try:
        return selector is not None and selector_matches(selector, labels)
    except (AttributeError, KeyError, TypeError):
        return unreadable


def claimant(selector: Mapping[str, Any], pools: Iterable[PoolClaim]) -> str | None:
    """The name of the pool that counts a pending Lease with `selector`, None if none may."""
    matching = [pool for pool in pools if matches(selector, pool.labels)]
    return min(matching, key=lambda pool: pool.seniority).name if matching else None


def counts_lease(selector: Mapping[str, Any], me: PoolClaim, rivals: Iterable[PoolClaim]) -> bool:
    """Whether `me` counts the pending Lease: it matches and no older rival matches it."""
    if not matches(selector, me.labels):
        return False
    return all(
        rival.seniority >= me.seniority or not matches(selector, rival.labels)
        for rival in rivals
        if rival.name != me.name
    )


def overlap(one: PoolClaim, other: PoolClaim) -> bool:
    """Either set's selector matches the other's instance labels."""
    return matches(one.selector, other.labels) or matches(other.selector, one.labels)
