"""What the cross-object checks need to know about the cluster, and nothing more.

`ClusterView` is the seam: the server passes the watch-fed cache (`webhook.cache`),
`virtualtarget validate` passes the classes found in its files (`StaticView`), tests pass
either. Every call takes the time it may spend and raises `ClusterUnavailable` instead of
overrunning it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pool.model.adapt import pool_claim
from pool.model.views import PoolClaim
from pool.rules.claims import overlap

__all__ = [
    "ClusterUnavailable",
    "ClusterView",
    "StaticView",
    "claims_of",
    "overlapping_claims",
    "sets_in",
    "sets_using",
]

Object = Mapping[str, Any]


class ClusterUnavailable(Exception):
    """The apiserver could not answer in time; the request should be retried."""


class ClusterView(Protocol):
    async def get_class(self, namespace: str, name: str, budget: float) -> Object | None:
        """The VirtualTargetClass `namespace/name`, or None when it does not exist."""
        ...

    async def sets_using_class(self, namespace: str, name: str, budget: float) -> list[str]:
        """Names of the ExporterSets in `namespace` whose class is `name`, sorted."""
        ...

    async def sets_of(self, namespace: str, budget: float) -> list[Object]:
        """The ExporterSets of `namespace`."""
        ...

    async def overlapping_sets(
        self, namespace: str, claim: PoolClaim, budget: float
    ) -> list[PoolClaim]:
        """The other ExporterSets of `namespace`, not being deleted, that overlap `claim`
        (`pool.rules.claims.overlap`), by name."""
        ...

    async def pool_instances(
        self, namespace: str, set_name: str, budget: float
    ) -> tuple[list[Object], list[Object]]:
        """The Exporters labelled for the set `set_name`, and Jumpstarter's Leases of the
        namespace (none where its Lease CRD is not installed)."""
        ...


def sets_in(sets: Iterable[Object], namespace: str) -> list[Object]:
    """The `sets` of `namespace`."""
    return [s for s in sets if s.get("metadata", {}).get("namespace", "") == namespace]


def sets_using(sets: Iterable[Object], namespace: str, name: str) -> list[str]:
    """The names of `sets` in `namespace` that reference the class `name`, sorted."""
    return sorted(
        str(s.get("metadata", {}).get("name"))
        for s in sets
        if s.get("metadata", {}).get("namespace", "") == namespace
        and isinstance(s.get("spec"), Mapping)
        and s["spec"].get("virtualTargetClassName") == name
    )


def claims_of(sets: Iterable[Object]) -> list[PoolClaim]:
    """The claims of the `sets` not being deleted (`pool.rules.claims`)."""
    return [pool_claim(s) for s in sets if not (s.get("metadata") or {}).get("deletionTimestamp")]


def overlapping_claims(sets: Iterable[Object], claim: PoolClaim) -> list[PoolClaim]:
    """The claims of the `sets`, not being deleted, other than `claim`'s that overlap it,
    by name (a scan: where no claim index is kept)."""
    found = [c for c in claims_of(sets) if c.name != claim.name and overlap(claim, c)]
    return sorted(found, key=lambda c: c.name)


class StaticView:
    """A fixed set of objects (classes and sets), as read from files."""

    def __init__(self, objects: Iterable[Object], default_namespace: str = "default") -> None:
        self._classes: dict[tuple[str, str], Object] = {}
        self._sets: list[Object] = []
        self._default_namespace = default_namespace
        for obj in objects:
            metadata = obj.get("metadata") or {}
            key = (metadata.get("namespace") or default_namespace, str(metadata.get("name")))
            if obj.get("kind") == "VirtualTargetClass":
                self._classes[key] = obj
            elif obj.get("kind") == "ExporterSet":
                namespaced = {**obj, "metadata": {**metadata, "namespace": key[0]}}
                self._sets.append(namespaced)

    async def get_class(self, namespace: str, name: str, budget: float) -> Object | None:
        return self._classes.get((namespace, name))

    async def sets_using_class(self, namespace: str, name: str, budget: float) -> list[str]:
        return sets_using(self._sets, namespace, name)

    async def sets_of(self, namespace: str, budget: float) -> list[Object]:
        return sets_in(self._sets, namespace)

    async def overlapping_sets(
        self, namespace: str, claim: PoolClaim, budget: float
    ) -> list[PoolClaim]:
        return overlapping_claims(await self.sets_of(namespace, budget), claim)

    async def pool_instances(
        self, namespace: str, set_name: str, budget: float
    ) -> tuple[list[Object], list[Object]]:
        return [], []  # files hold no instances
