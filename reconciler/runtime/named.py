"""A cache of objects read by name, for what a cluster-wide install may not list.

RBAC cannot restrict a list or a watch by label, so a reconciler that watched Secrets
cluster-wide could read every Secret in the cluster. A cluster-wide install therefore
holds only `get` on Secrets, and this cache reads the Secrets the reconciler needs (the
config Secret of each instance, the credential Secret its Exporter's status names) by
name: a name is fetched as soon as it is tracked and again every `resync` seconds, each
name on its own schedule so the reads spread over the period. A change seen on a read
(a rotated token) reaches the handlers as a watch event would, so a rotation reaches
the config Secret within `resync` seconds (plus a pass). The reconciler's own writes
are stored at once (`observed_write`), as a watch would bring them back.

It offers the part of `reconciler.runtime.cache.Informer` the controller uses (get,
handlers, apply, run, synced, counters), so the controller treats both alike.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from reconciler.model.access import Resource
from reconciler.runtime.cache import Handler, ObjKey, Transform, key_of
from reconciler.runtime.kube import Kube

__all__ = ["DEFAULT_RESYNC", "NamedCache"]

log = logging.getLogger("reconciler.named")  # stable: log filters select by it

Obj = dict[str, Any]
DEFAULT_RESYNC = 60.0


class NamedCache:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        resync: float = DEFAULT_RESYNC,
        transform: Transform | None = None,
        clock: Callable[[], float] = time.monotonic,
        after: threading.Event | None = None,
    ) -> None:
        """`after`: the cache that tracks names (the Exporters') is filled; this one is
        synced once it has read every name tracked then, so a first pass finds them."""
        self.kube, self.resource, self.resync = kube, resource, resync
        self.after = after
        self.transform, self.clock = transform, clock
        self.synced = threading.Event()
        self.relists = 0  # full rounds of reads (each tracked name once)
        self.watch_restarts = 0  # never watches
        self.reads = 0  # GETs sent
        self.last_contact = clock()
        self.running = False
        self._objects: dict[ObjKey, Obj] = {}
        self._due: dict[ObjKey, float] = {}  # tracked name -> when to read it next
        self._handlers: list[Handler] = []
        self._lock = threading.RLock()
        self._wake = threading.Event()

    # -- what to read ---------------------------------------------------------------
    def track(self, namespace: str, name: str) -> None:
        """Read this object from now on (at once, if it is new)."""
        key = (namespace, name)
        with self._lock:
            if key in self._due:
                return
            self._due[key] = float("-inf")
        self._wake.set()

    def untrack(self, namespace: str, name: str) -> None:
        with self._lock:
            self._due.pop((namespace, name), None)
            self._objects.pop((namespace, name), None)

    def tracked(self) -> list[ObjKey]:
        with self._lock:
            return list(self._due)

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
        obj = self.transform(obj) if self.transform is not None else obj
        key = key_of(obj)
        with self._lock:
            old = self._objects.get(key)
            if kind == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = obj
        for handler in self._handlers:
            handler(kind, obj, old)

    def observed_write(self, obj: Obj) -> None:
        """The answer to a write of ours: the newest state, stored as a watch would."""
        if key_of(obj) in self._due:
            self.apply("MODIFIED", obj)

    def _read(self, key: ObjKey) -> None:
        self.reads += 1
        found = self.kube.get(self.resource, *key)
        self.last_contact = self.clock()
        with self._lock:
            if key not in self._due:
                return  # untracked while it was read
            self._due[key] = self.clock() + self.resync
            old = self._objects.get(key)
        if found is None:
            if old is not None:
                self.apply("DELETED", old)
            return
        found.setdefault("apiVersion", self.resource.api_version)
        found.setdefault("kind", self.resource.kind)
        version = (found.get("metadata") or {}).get("resourceVersion")
        if old is None or (old.get("metadata") or {}).get("resourceVersion") != version:
            self.apply("ADDED" if old is None else "MODIFIED", found)

    def read_due(self) -> int:
        """Read every tracked name whose time has come; how many were read. A read that
        fails is logged and tried again a second later, the others go on."""
        now = self.clock()
        with self._lock:
            due = [key for key, at in self._due.items() if at <= now]
        for key in due:
            try:
                self._read(key)
            except Exception as exc:  # an answer refused, network errors, apiserver restarts
                log.warning("%s %s/%s: read failed (%s); retrying", self.resource.kind, *key, exc)
                with self._lock:
                    if key in self._due:
                        self._due[key] = self.clock() + 1.0
        return len(due)

    def relist(self) -> None:
        """Read every tracked name now (a full round)."""
        with self._lock:
            keys = list(self._due)
        for key in keys:
            self._read(key)
        self.relists += 1
        self.synced.set()

    # -- running ----------------------------------------------------------------------
    def stalled_for(self, now: float | None = None) -> float:
        """Infinite once the loop ended; else 0: a loop that reads by name waits on no
        watch (a failing read is logged and retried)."""
        return 0.0 if self.running else float("inf")

    def run(self, stop: threading.Event) -> None:
        """Read what is due until `stop`; woken at once when a new name is tracked."""
        self.running = True
        try:
            while self.after is not None and not self.after.wait(0.2):
                if stop.is_set():
                    return
            self.read_due()
            self.synced.set()
            while not stop.is_set():
                self.read_due()
                with self._lock:
                    upcoming = min(self._due.values(), default=self.clock() + self.resync)
                # at most a second, so `stop` is noticed; at once for a new name
                self._wake.wait(max(0.0, min(upcoming - self.clock(), 1.0)))
                self._wake.clear()
        finally:
            self.running = False
