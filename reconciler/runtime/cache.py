"""List-and-watch caches of raw objects, with secondary indexes.

Each `Informer` lists one resource (in every namespace, one, or each of a list: one
list-and-watch loop per namespace, all feeding one store), then watches from the list's
resource version,
resuming every watch from the last version it saw (bookmarks included) and listing
again only when the server answers 410 Gone. It counts its lists and watch restarts,
and notes the last time the apiserver answered it, which the liveness probe reads.
Stored objects drop `managedFields` (half the bytes of a typical object, never read) and
share their keys and short strings (`interned`).
Handlers run on the informer's thread with (event type, new object, old object);
indexes map a key to object keys so that building one set's observation does not scan
every object.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from pool.model.access import Resource
from reconciler.runtime.kube import ApiError, Kube, WatchExpired

__all__ = ["Cache", "Informer", "ObjKey", "interned", "keep_only", "key_of", "meta_of"]

log = logging.getLogger("reconciler.cache")  # stable: log filters select by it

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace, name)
_INTERNED = 100  # longer strings (tokens, data, messages) are rarely shared
Handler = Callable[[str, Obj, Obj | None], None]
IndexFn = Callable[[Obj], Iterable[Any]]
Transform = Callable[[Obj], Obj]
Derive = Callable[[Obj], Any]
# (what was derived from the previous event of the object, what this one derives) -> kept
Carry = Callable[[Any, Any], Any]


class Cache(Protocol):
    """What the controller, `virtualtarget plan` and the metrics use of a cache: an
    `Informer`, or a `reconciler.runtime.named.NamedCache` where a resource may not be listed."""

    resource: Resource
    synced: threading.Event
    relists: int
    watch_restarts: int

    def get(self, namespace: str, name: str) -> Obj | None: ...
    def items(self) -> list[Obj]: ...
    def apply(self, kind: str, obj: Obj) -> None: ...
    def add_handler(self, handler: Handler) -> None: ...
    def relist(self) -> None: ...
    def run(self, stop: threading.Event) -> None: ...
    def stalled_for(self, now: float | None = None) -> float: ...
    def observed_write(self, obj: Obj) -> None: ...
    def __len__(self) -> int: ...


def meta_of(obj: Obj) -> dict[str, Any]:
    """The object's metadata, {} where it has none (or not a mapping)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def key_of(obj: Obj) -> ObjKey:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _slim(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return obj


def interned(obj: Any) -> Any:
    """The object with its keys, and its strings of up to `_INTERNED` characters, interned:
    each watch event is decoded on its own, so without this every stored object holds its
    own copy of "metadata", "ownerReferences", its namespace, its labels... At 10,000
    Exporters and Pods that halves what their objects and views take."""
    if isinstance(obj, dict):
        return {sys.intern(k): interned(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [interned(v) for v in obj]
    if isinstance(obj, str) and len(obj) <= _INTERNED:
        return sys.intern(obj)
    return obj


def keep_only(*paths: str) -> Transform:
    """A transform keeping `metadata` and the dotted `paths` (`status.phase`), nothing else."""
    split = [p.split(".") for p in paths]

    def transform(obj: Obj) -> Obj:
        obj = _slim(obj)
        kept: Obj = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
        for parts in split:
            node: Any = obj
            for part in parts:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                target = kept
                for part in parts[:-1]:
                    target = target.setdefault(part, {})
                target[parts[-1]] = node
        return kept

    return transform


class Informer:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        namespaces: Sequence[str] | None = None,
        watch_timeout: int = 240,
        retry_delay: float = 1.0,
        missing_retry: float = 2.0,
        transform: Transform | None = None,
        derive: Derive | None = None,
        carry: Carry | None = None,
    ) -> None:
        """`transform` trims what is stored; `derive` computes, once per event, a value
        kept beside each object (the planner's view), so a pass does not recompute it.
        A resource that is not served (a CRD installed later, Jumpstarter's Lease) is
        listed again after 0.5 s, doubling up to `missing_retry`: it is seen within
        seconds of appearing, at the cost of one cheap 404 every few seconds until then.
        `namespaces` lists and watches each of those namespaces (instead of `namespace`).
        `carry` keeps what an earlier event showed and a later one no longer does: it gets
        the value derived from the object's previous event (None for a new object) and
        this event's, and returns the one to keep."""
        self.kube, self.resource = kube, resource
        # What each list-and-watch loop covers: None is every namespace.
        self.streams: tuple[str | None, ...] = (
            tuple(namespaces) if namespaces is not None else (namespace,)
        )
        self.label_selector = label_selector
        self.watch_timeout, self.retry_delay = watch_timeout, retry_delay
        self.missing_retry = missing_retry
        self.synced = threading.Event()  # set once every loop has listed
        self._synced_streams: set[str | None] = set()
        self._versions: dict[str | None, str] = {}
        self.relists = 0
        self.watch_restarts = 0
        # each loop's last answer from the apiserver (list, event, 404)
        self._contact: dict[str | None, float] = dict.fromkeys(self.streams, time.monotonic())
        self.running = False
        self.transform, self.derive, self.carry = transform, derive, carry
        self._objects: dict[ObjKey, Obj] = {}
        self._derived: dict[ObjKey, Any] = {}
        self._index_fns: dict[str, IndexFn] = {}
        self._indexes: dict[str, defaultdict[Any, set[ObjKey]]] = {}
        self._handlers: list[Handler] = []
        self._lock = threading.RLock()

    # -- reading ---------------------------------------------------------------------
    def add_index(self, name: str, fn: IndexFn) -> None:
        with self._lock:
            self._index_fns[name] = fn
            self._indexes[name] = defaultdict(set)
            for key, obj in self._objects.items():
                for value in fn(obj):
                    self._indexes[name][value].add(key)

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def get(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def by_index(self, name: str, value: Any) -> list[Obj]:
        with self._lock:
            keys = self._indexes[name].get(value, ())
            return [self._objects[k] for k in keys]

    def derived_by_index(self, name: str, value: Any) -> list[Any]:
        """The derived values of the objects under one index key."""
        with self._lock:
            keys = self._indexes[name].get(value, ())
            return [self._derived[k] for k in keys]

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def observed_write(self, obj: Obj) -> None:
        """The answer to a write of ours: the watch brings it, nothing to do."""

    def __len__(self) -> int:
        return len(self._objects)

    # -- writing ---------------------------------------------------------------------
    def _unindex(self, key: ObjKey, obj: Obj) -> None:
        for name, fn in self._index_fns.items():
            for value in fn(obj):
                bucket = self._indexes[name].get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del self._indexes[name][value]

    def _store(self, kind: str, obj: Obj, derived: Any) -> tuple[Obj | None, Obj]:
        key = key_of(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None:
                self._unindex(key, old)
            if kind == "DELETED":
                self._objects.pop(key, None)
                self._derived.pop(key, None)
            else:
                self._objects[key] = obj
                if self.derive is not None:
                    if self.carry is not None:
                        derived = self.carry(self._derived.get(key), derived)
                    self._derived[key] = derived
                for name, fn in self._index_fns.items():
                    for value in fn(obj):
                        self._indexes[name][value].add(key)
        return old, obj

    def apply(self, kind: str, obj: Obj) -> None:
        """Apply one event (also used by tests and benchmarks to fill a cache)."""
        obj = interned(_slim(obj))
        # Derive from the whole object, then store only what the transform keeps.
        derived = self.derive(obj) if self.derive is not None and kind != "DELETED" else None
        obj = self.transform(obj) if self.transform is not None else _slim(obj)
        old, new = self._store(kind, obj, derived)
        for handler in self._handlers:
            handler(kind, new, old)

    # -- running ---------------------------------------------------------------------
    @property
    def last_contact(self) -> float:
        """When the loop that heard from the apiserver longest ago last did."""
        return min(self._contact.values())

    @last_contact.setter
    def last_contact(self, value: float) -> None:
        for stream in self._contact:
            self._contact[stream] = value

    def _mark_synced(self, stream: str | None) -> None:
        self._synced_streams.add(stream)
        if self._synced_streams.issuperset(self.streams):
            self.synced.set()

    def relist(self) -> None:
        """List every namespace of the cache afresh."""
        for stream in self.streams:
            self._relist(stream)

    def _relist(self, stream: str | None) -> None:
        items, version = self.kube.list(self.resource, stream, self.label_selector)
        self._contact[stream] = time.monotonic()
        self.replace(items, stream)
        self._versions[stream] = version
        self.relists += 1
        self._mark_synced(stream)

    def replace(self, objs: list[Obj], namespace: str | None = None) -> None:
        """A fresh list (of one namespace, or of all): deletions for what vanished from it,
        updates for the rest."""
        fresh = {key_of(o): o for o in objs}
        with self._lock:
            gone = [
                o
                for k, o in self._objects.items()
                if k not in fresh and (namespace is None or k[0] == namespace)
            ]
        for obj in gone:
            self.apply("DELETED", obj)
        for obj in objs:
            self.apply("MODIFIED", obj)

    def stalled_for(self, now: float | None = None) -> float:
        """Seconds since the apiserver last answered a loop of this cache (infinite once
        they ended)."""
        if not self.running:
            return float("inf")
        return (time.monotonic() if now is None else now) - self.last_contact

    def run(self, stop: threading.Event) -> None:
        """List, then watch until `stop`; errors back off and resume, 410 relists. One
        loop per namespace of the cache (the first on this thread)."""
        self.running = True
        try:
            others = [
                threading.Thread(
                    target=self._loop,
                    args=(stop, stream),
                    daemon=True,
                    name=f"{self.resource.plural}-{stream}",
                )
                for stream in self.streams[1:]
            ]
            for thread in others:
                thread.start()
            self._loop(stop, self.streams[0])
            for thread in others:
                thread.join()
        finally:
            self.running = False

    def _loop(self, stop: threading.Event, stream: str | None) -> None:
        need_list = True
        missing_wait = 0.5
        first_watch = True
        where = f"{self.resource.plural}{f' in {stream}' if stream else ''}"
        while not stop.is_set():
            try:
                if need_list:
                    self._relist(stream)
                    need_list = False
                    missing_wait = 0.5
                if not first_watch:
                    self.watch_restarts += 1
                first_watch = False
                for kind, obj in self.kube.watch(
                    self.resource,
                    stream,
                    self._versions.get(stream, ""),
                    self.label_selector,
                    self.watch_timeout,
                ):
                    self._contact[stream] = time.monotonic()
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if kind != "BOOKMARK":
                        obj.setdefault("apiVersion", self.resource.api_version)
                        obj.setdefault("kind", self.resource.kind)
                        self.apply(kind, obj)
                    if version:
                        self._versions[stream] = version
                    if stop.is_set():
                        return
                self._contact[stream] = time.monotonic()  # a watch the server ended in time
            except WatchExpired:
                log.info("%s: resource version expired, listing again", where)
                need_list = True
            except ApiError as exc:
                if exc.status == 404 and need_list:
                    # Not installed (yet): an empty cache until the resource appears.
                    self._contact[stream] = time.monotonic()
                    if stream not in self._synced_streams:
                        log.warning("%s: not served (%s); retrying", where, exc)
                    self._mark_synced(stream)
                    stop.wait(missing_wait)
                    missing_wait = min(missing_wait * 2, self.missing_retry)
                else:
                    log.warning("%s: %s; retrying", where, exc)
                    stop.wait(self.retry_delay)
            except Exception as exc:  # network errors, apiserver restarts
                log.warning("%s: watch failed (%s); retrying", where, exc)
                stop.wait(self.retry_delay)
