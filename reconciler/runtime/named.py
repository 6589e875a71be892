"""A cache of objects read by name, for what a cluster-wide install may not list.

RBAC cannot restrict a list or a watch by label, so a reconciler that watched Secrets
cluster-wide could read every Secret in the cluster. A cluster-wide install therefore
holds only `get` on Secrets, and this cache reads the Secrets the reconciler needs (the
config Secret of each instance, the credential Secret its Exporter's status names) by
name, when something says one may have changed (`reconciler.runtime.readschedule`):

- when a name is first tracked (the Exporter's status names a new credential Secret);
- when the caller urges it (`urge`: a write of ours against it failed) or confirms it
  before use (`confirm`: an instance's Pod is about to be created, and `jmp run` reads
  its config only at start);
- the answer to a write of ours is kept as a read would be (`observed_write`);
- besides, a slow safety resync re-reads the name read longest ago, at most `budget`
  reads a second in all and no name more often than every `floor` seconds.

A change seen on a read (a rotated token) reaches the handlers as a watch event would.
A read that started before a newer state was stored (another read, a write's answer) is
dropped, so the cache never steps back.

It offers the part of `reconciler.runtime.cache.Informer` the controller uses (get,
handlers, apply, run, synced, counters), so the controller treats both alike.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pool.model.access import Resource
from reconciler.runtime.cache import Handler, ObjKey, Transform, interned, key_of
from reconciler.runtime.kube import Kube
from reconciler.runtime.readschedule import ReadSchedule

__all__ = ["DEFAULT_BUDGET", "DEFAULT_RESYNC", "NamedCache"]

log = logging.getLogger("reconciler.named")  # stable: log filters select by it

Obj = dict[str, Any]
DEFAULT_RESYNC = 60.0  # the least time between two resync reads of one name
DEFAULT_BUDGET = 1.0  # resync reads a second, over every name together


class NamedCache:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        resync: float = DEFAULT_RESYNC,
        transform: Transform | None = None,
        clock: Callable[[], float] = time.monotonic,
        after: threading.Event | None = None,
        *,
        budget: float = DEFAULT_BUDGET,
    ) -> None:
        """`resync` is the floor of the safety resync per name, `budget` its total rate.
        `after`: the cache that tracks names (the Exporters') is filled; this one is
        synced once it has read every name tracked then, so a first pass finds them."""
        self.kube, self.resource = kube, resource
        self.after = after
        self.transform, self.clock = transform, clock
        self.schedule: ReadSchedule[ObjKey] = ReadSchedule(budget, resync)
        self.synced = threading.Event()
        self.relists = 0  # full rounds of reads (each tracked name once; `relist`)
        self.watch_restarts = 0  # never watches
        self.reads = 0  # GETs sent
        self.last_contact = clock()
        self.running = False
        self._objects: dict[ObjKey, Obj] = {}
        # How many states were stored per name: a read that saw the count move while it
        # was under way may be older than what is stored, and is dropped.
        self._stored: dict[ObjKey, int] = {}
        self._handlers: list[Handler] = []
        self._lock = threading.RLock()
        self._wake = threading.Event()

    # -- what to read ---------------------------------------------------------------
    def track(self, namespace: str, name: str) -> None:
        """Read this object from now on (at once, if it is new)."""
        with self._lock:
            new = self.schedule.track((namespace, name))
        if new:
            self._wake.set()

    def untrack(self, namespace: str, name: str) -> None:
        with self._lock:
            self.schedule.untrack((namespace, name))
            self._objects.pop((namespace, name), None)
            self._stored.pop((namespace, name), None)

    def tracked(self) -> list[ObjKey]:
        with self._lock:
            return list(self.schedule)

    def urge(self, namespace: str, name: str) -> None:
        """It may have changed: read it soon (on the reading loop)."""
        with self._lock:
            self.schedule.urge((namespace, name))
        self._wake.set()

    def confirm(self, namespace: str, name: str) -> None:
        """Read it now, in the caller's thread (a tracked name only); a failed read is
        logged and left to the reading loop."""
        key = (namespace, name)
        with self._lock:
            if key not in self.schedule:
                return
        try:
            self._read(key)
        except Exception as exc:  # an answer refused, network errors, apiserver restarts
            log.warning("%s %s/%s: read failed (%s)", self.resource.kind, *key, exc)
            self.urge(*key)

    # -- reading (as Informer) --------------------------------------------------------
    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def get(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects)

    # -- writing ----------------------------------------------------------------------
    def apply(self, kind: str, obj: Obj) -> None:
        """Store one object (or its deletion) and tell the handlers."""
        self._store(kind, obj, None)

    def _store(self, kind: str, obj: Obj, seen: int | None) -> None:
        """Store unless `seen` (the store count when the read began) is out of date."""
        obj = interned(self.transform(obj) if self.transform is not None else obj)
        key = key_of(obj)
        with self._lock:
            stored = self._stored.get(key, 0)
            if seen is not None and seen != stored:
                return  # a newer state was stored while this one was read
            old = self._objects.get(key)
            if kind == "DELETED":
                if old is None and seen is not None:
                    return  # absent, and known absent
                self._objects.pop(key, None)
            else:
                if seen is not None and old is not None and _version(old) == _version(obj):
                    return  # unchanged: no event
                self._objects[key] = obj
                kind = "ADDED" if old is None and seen is not None else kind
            if key in self.schedule:
                self._stored[key] = stored + 1
        for handler in self._handlers:
            handler(kind, obj, old)

    def observed_write(self, obj: Obj) -> None:
        """The answer to a write of ours: the newest state, stored as a watch would, and
        as fresh as a read."""
        key = key_of(obj)
        with self._lock:
            if key not in self.schedule:
                return
            self.schedule.read(key, self.clock())
        self._store("MODIFIED", obj, None)

    def _read(self, key: ObjKey) -> None:
        with self._lock:
            seen = self._stored.get(key, 0)
        self.reads += 1
        found = self.kube.get(self.resource, *key)
        self.last_contact = self.clock()
        with self._lock:
            if key not in self.schedule:
                return  # untracked while it was read
            self.schedule.read(key, self.last_contact)
            old = self._objects.get(key)
        if found is None:
            if old is not None:
                self._store("DELETED", old, seen)
            return
        found.setdefault("apiVersion", self.resource.api_version)
        found.setdefault("kind", self.resource.kind)
        self._store("MODIFIED", found, seen)

    def read_due(self) -> int:
        """Read every name whose time has come (`ReadSchedule.due`); how many were read.
        A read that fails is logged and tried again a second later, the others go on."""
        with self._lock:
            due = self.schedule.due(self.clock())
        for key in due:
            try:
                self._read(key)
            except Exception as exc:  # an answer refused, network errors, apiserver restarts
                log.warning("%s %s/%s: read failed (%s); retrying", self.resource.kind, *key, exc)
                with self._lock:
                    self.schedule.failed(key, self.clock())
        return len(due)

    def relist(self) -> None:
        """Read every tracked name now (a full round)."""
        for key in self.tracked():
            self._read(key)
        self.relists += 1
        self.synced.set()

    # -- running ----------------------------------------------------------------------
    def stalled_for(self, now: float | None = None) -> float:
        """Infinite once the loop ended; else 0: a loop that reads by name waits on no
        watch (a failing read is logged and retried)."""
        return 0.0 if self.running else float("inf")

    def run(self, stop: threading.Event) -> None:
        """Read what is due until `stop`; woken at once when a name is tracked or urged."""
        self.running = True
        try:
            while self.after is not None and not self.after.wait(0.2):
                if stop.is_set():
                    return
            self.read_due()
            self.synced.set()
            while not stop.is_set():
                self._wake.clear()  # before reading: a name tracked meanwhile wakes the wait
                self.read_due()
                with self._lock:
                    now = self.clock()
                    upcoming = self.schedule.wake_at(now)
                # at most a second, so `stop` is noticed; at once for a new or urged name
                self._wake.wait(max(0.0, min(upcoming - now, 1.0)))
        finally:
            self.running = False


def _version(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")
