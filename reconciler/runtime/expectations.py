"""Writes this process has made that its caches have not shown yet, per ExporterSet.

A pass plans from the caches, and a cache shows a write some milliseconds after the
apiserver answered it. The pass right after a write (the Pods lane's pass is followed at
once by an ordinary one, a create's own event requeues the set) would otherwise plan the
same step again: a second Pod create answered 409, a second Event for a wait that began
once. As a ReplicaSet controller keeps its expectations, the runtime notes each create
(and each Pod it deletes) here when the apiserver accepts it and treats it as done until
the cache shows it, or until `ttl` has passed (a write the cache never shows: deleted at
once, say; the next pass then sees the world as it is). The set's status the same way:
the status last written stands for the cached one until the cached set changes, however
long its watch lags (a patch the apiserver accepted always shows in a later version, or
changed nothing): with a lagging cache, a pass planned from the older status it holds
would write the same status again, a patch that changes nothing.
Thread-safe.

Exporters are created with generateName, so these expectations are what keeps a lagging
cache from making a duplicate. Where this memory cannot know, the set is doubted and its
next pass lists its Exporters live (a quorum read: every create the apiserver committed
is in it) and expects those the cache lacks:
- a create that got no answer (the connection lost, a 5xx): it may have been made, under
  a name never learnt;
- a process that starts leading (after a crash, or a standby taking over from warm
  caches that may lag the last leader's writes): every set, once.
A create still being processed by the apiserver after its client gave up (30 s) and after
that live read could still be missed; the apiserver finishes or fails a request within
its own timeout, long before a restarted process or a new leader reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

__all__ = ["EXPORTER", "POD", "POD_DELETED", "Expectations"]

EXPORTER = "exporter"  # an Exporter created, by name
POD = "pod"  # an instance's Pod created, by the Exporter's uid
POD_DELETED = "pod-deleted"  # a Pod deleted, by its uid: terminating until the cache says


class Expectations:
    def __init__(self, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.clock = ttl, clock
        self._pending: dict[tuple[Hashable, str], dict[str, float]] = {}
        self._status: dict[Hashable, tuple[str, Mapping[str, Any]]] = {}
        self._doubted: set[Hashable] = set()
        self._events: dict[tuple[Hashable, str, str], float] = {}
        self._prune_at = 0.0  # when the Events remembered are next pruned
        self._lock = threading.Lock()

    def expect(self, key: Hashable, kind: str, ident: str) -> None:
        with self._lock:
            self._pending.setdefault((key, kind), {})[ident] = self.clock() + self.ttl

    def pending(self, key: Hashable, kind: str, seen: Callable[[str], bool]) -> frozenset[str]:
        """What is still expected: not `seen` in the cache and not expired."""
        now = self.clock()
        with self._lock:
            found = self._pending.get((key, kind), {})
            for ident, deadline in list(found.items()):
                if deadline < now or seen(ident):
                    del found[ident]
            if not found:
                self._pending.pop((key, kind), None)
            return frozenset(found)

    def new_event(self, key: Hashable, reason: str, note: str) -> bool:
        """False when this very Event was written for the set within `ttl` (a pass
        planned before the status that noted it reached the cache); else remember it."""
        now = self.clock()
        with self._lock:
            if now >= self._prune_at:  # not at every Event: thousands are kept while pools fill
                self._prune_at = now + 1.0
                for seen in [k for k, deadline in self._events.items() if deadline < now]:
                    del self._events[seen]
            if self._events.get((key, reason, note), now - 1) >= now:
                return False
            self._events[(key, reason, note)] = now + self.ttl
            return True

    def doubt(self, key: Hashable) -> None:
        """The set's Exporters must be read live before its next create."""
        with self._lock:
            self._doubted.add(key)

    def doubted(self, key: Hashable) -> bool:
        """Whether the set's Exporters must be read live before it is planned."""
        with self._lock:
            return key in self._doubted

    def resolved(self, key: Hashable) -> None:
        """The live read succeeded (a read that fails leaves the doubt in place)."""
        with self._lock:
            self._doubted.discard(key)

    def wrote_status(self, key: Hashable, version: str, status: Mapping[str, Any]) -> None:
        """A status written over the cached set of resourceVersion `version`."""
        with self._lock:
            self._status[key] = (version, status)

    def status(self, key: Hashable, version: str, cached: Mapping[str, Any]) -> Mapping[str, Any]:
        """The status to plan from: the one last written while the cache still holds the
        set it was written over, else the cached one."""
        with self._lock:
            written = self._status.get(key)
            if written is None:
                return cached
            if written[0] != version:
                del self._status[key]
                return cached
            return written[1]

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._status.pop(key, None)
            self._doubted.discard(key)
            for pair in [p for p in self._pending if p[0] == key]:
                del self._pending[pair]
