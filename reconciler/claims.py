"""Which pool counts a pending Lease when several could serve it. Pure: no I/O.

A pending Lease is one pool's demand only: a pool counts it (`desired` grows by one) when
the Lease's selector matches the labels the pool's instances carry AND the pool is the
Lease's claimant, the oldest of the namespace's ExporterSets (not being deleted) whose
instance labels the selector matches: smallest `creationTimestamp`, then smallest name.
Every replica and every pool computes this from the same objects, so one Lease never
makes two pools create an instance each.

Two sets overlap when the selector of either matches the instance labels of the other:
a Lease written for one of them can then match both. The webhook warns about it
(`webhook.pools`), naming the set that would count such a Lease.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from api.labels import selector_matches
from reconciler.keys import SET_LABEL
from reconciler.timefmt import parse_time

__all__ = ["PoolClaim", "claimant", "counts_lease", "instance_labels", "overlap", "pool_claim"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def instance_labels(pool_name: str, template_labels: Mapping[str, str]) -> dict[str, str]:
    """The labels every instance carries: the template's plus the one naming the set."""
    return {**template_labels, SET_LABEL: pool_name}


@dataclass(frozen=True, slots=True)
class PoolClaim:
    """A set as the claim rule sees it: its name, age, selector and instances' labels."""

    name: str
    created: datetime | None
    labels: Mapping[str, str]
    selector: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def seniority(self) -> tuple[datetime, str]:
        """The sort key of the rule: older first, then by name."""
        return self.created or _EPOCH, self.name


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    try:
        return selector is not None and selector_matches(selector, labels)
    except (AttributeError, KeyError, TypeError):
        return False  # a selector no one can read matches nothing


def claimant(selector: Mapping[str, Any], pools: Iterable[PoolClaim]) -> str | None:
    """The name of the pool that counts a pending Lease with `selector`, None if none may."""
    matching = [pool for pool in pools if _matches(selector, pool.labels)]
    return min(matching, key=lambda pool: pool.seniority).name if matching else None


def counts_lease(selector: Mapping[str, Any], me: PoolClaim, rivals: Iterable[PoolClaim]) -> bool:
    """Whether `me` counts the pending Lease: it matches and no older rival matches it."""
    if not _matches(selector, me.labels):
        return False
    return all(
        rival.seniority >= me.seniority or not _matches(selector, rival.labels)
        for rival in rivals
        if rival.name != me.name
    )


def overlap(one: PoolClaim, other: PoolClaim) -> bool:
    """Either set's selector matches the other's instance labels."""
    return _matches(one.selector, other.labels) or _matches(other.selector, one.labels)


def pool_claim(exporter_set: Mapping[str, Any]) -> PoolClaim:
    """A set (a raw API object) as the claim rule sees it."""
    meta = _map(exporter_set.get("metadata"))
    spec = _map(exporter_set.get("spec"))
    labels = _map(_map(_map(spec.get("template")).get("metadata")).get("labels"))
    name = str(meta.get("name", ""))
    selector = spec.get("selector")
    try:
        created: datetime | None = parse_time(str(meta["creationTimestamp"]))
    except (KeyError, ValueError):
        created = None
    return PoolClaim(
        name,
        created,
        instance_labels(name, {str(k): str(v) for k, v in labels.items()}),
        selector if isinstance(selector, Mapping) else None,
    )


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
