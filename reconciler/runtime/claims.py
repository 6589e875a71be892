"""Who claims what, read from the caches: the namespace's sets as the claim rule sees
them, and the Leases that name a pool's instance or may match its instances' labels.

Event routing (which sets a Lease or a set's change wakes), the observation (a pool's
Leases and rivals) and the leftovers (who holds an instance of a deleted set) ask the
same questions; they ask them here. The claim index is kept by the sets' events (the
informer's thread) and read by the passes (the workers'): under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pool.model.adapt import pool_claim
from pool.model.views import LeaseView, PoolClaim
from pool.rules.claimindex import ClaimIndex, anchors_of
from pool.rules.claims import matches
from reconciler.runtime.cache import Informer, ObjKey

__all__ = ["Claims"]

Obj = dict[str, Any]


class Claims:
    def __init__(self, leases: Informer) -> None:
        self.leases = leases  # the cached Jumpstarter Leases, indexed by exporter and anchor
        self.index = ClaimIndex()
        self._lock = threading.Lock()

    def update(self, key: ObjKey, exporter_set: Obj | None) -> list[PoolClaim]:
        """Put the set's claim in the index, or drop it (`exporter_set` None: deleted or
        being deleted); its claims before and after, each once."""
        with self._lock:
            before = self.index.get(*key)
            if exporter_set is None:
                self.index.drop(*key)
            else:
                self.index.put(key[0], pool_claim(exporter_set))
            after = self.index.get(*key)
        return list({c.name: c for c in (before, after) if c is not None}.values())

    def matching(self, namespace: str, selector: Any, *, unreadable: bool) -> list[PoolClaim]:
        """The sets whose instances `selector` matches (`unreadable`: a selector no one
        can read matches every set, to be woken)."""
        with self._lock:
            return self.index.matching(namespace, selector, unreadable=unreadable)

    def leases_matching(self, namespace: str, labels: Mapping[str, str]) -> list[LeaseView]:
        """The Leases whose selector may match `labels` (under one of its anchors)."""
        return [
            view
            for pair in anchors_of(labels)
            for view in self.leases.derived_by_index("anchor", (namespace, pair))
            if matches(view.selector, labels, unreadable=True)
        ]

    def leases_naming(self, namespace: str, exporter: str) -> list[LeaseView]:
        return self.leases.derived_by_index("exporter", (namespace, exporter))
