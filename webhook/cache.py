"""A watch-fed cache of VirtualTargetClasses and ExporterSets, read by the cross-object checks.

Which resources are listed and watched comes from `webhook.access.CACHED_KINDS`, the same
table the deploy RBAC is generated from. Each kind has a thread that lists, then watches
from the list's resourceVersion, and relists after a 410 Gone or a broken connection.
The event loop never blocks: a cache hit is a dict read, and a miss (a class created a
moment before its set) is a live read run in a worker thread, bounded by the request's
budget, that raises `ClusterUnavailable` instead of overrunning it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, ReadTimeoutError

from pool.model.views import PoolClaim
from pool.rules.claimindex import ClaimIndex
from webhook.access import CACHED_KINDS, INSTANCE_KINDS
from webhook.clusterview import ClusterUnavailable, claims_of, overlapping_claims, sets_using
from webhook.pools import SET_LABEL
from webhook.routes import Kind

__all__ = ["ClusterCache", "KindCache"]

log = logging.getLogger(__name__)

Object = Mapping[str, Any]
_WATCH_SECONDS = 300
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)


class KindCache:
    """One kind's objects by (namespace, name), kept current by a list and a watch; for
    ExporterSets also their claims (`pool.rules.claimindex`), so that a set's review
    compares it with the sets it may overlap, not with every set of its namespace."""

    def __init__(self, api: client.CustomObjectsApi, kind: Kind) -> None:
        self.api = api
        self.kind = kind
        self.synced = threading.Event()
        self._objects: dict[tuple[str, str], Object] = {}
        self._by_namespace: dict[str, dict[str, Object]] = {}
        self._claims = _claims_of(self._objects) if kind.kind == "ExporterSet" else None
        self._lock = threading.Lock()

    def get(self, namespace: str, name: str) -> Object | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def values(self) -> list[Object]:
        with self._lock:
            return list(self._objects.values())

    def values_in(self, namespace: str) -> list[Object]:
        """The objects of one namespace."""
        with self._lock:
            return list(self._by_namespace.get(namespace, {}).values())

    def overlapping(self, namespace: str, claim: PoolClaim) -> list[PoolClaim]:
        """The sets of `namespace` (not being deleted) that overlap `claim`, by name."""
        with self._lock:
            return self._claims.overlapping(namespace, claim) if self._claims is not None else []

    def run(self, stop: threading.Event) -> None:
        """List and watch until `stop` is set; every failure leads to a fresh list."""
        failures = 0
        while not stop.is_set():
            try:
                version = self._list()
                failures = 0
                self._watch(version, stop)
            except Exception as exc:  # any failure: back off, relist
                delay = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
                failures += 1
                log.warning(
                    "%s cache: %s; relisting in %.1fs", self.kind.plural, _short(exc), delay
                )
                stop.wait(delay)

    def _list(self) -> str:
        """List every object afresh; the resourceVersion to watch from."""
        listing: Any = self.api.list_cluster_custom_object(
            self.kind.group, self.kind.version, self.kind.plural, _request_timeout=30
        )
        objects = {_key(item): item for item in listing.get("items", [])}
        by_namespace: dict[str, dict[str, Object]] = {}
        for (namespace, name), item in objects.items():
            by_namespace.setdefault(namespace, {})[name] = item
        claims = _claims_of(objects) if self._claims is not None else None
        with self._lock:
            self._objects, self._by_namespace, self._claims = objects, by_namespace, claims
        self.synced.set()
        return str(listing.get("metadata", {}).get("resourceVersion", ""))

    def _watch(self, version: str, stop: threading.Event) -> None:
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(  # type: ignore[no-untyped-call]
            self.api.list_cluster_custom_object,
            self.kind.group,
            self.kind.version,
            self.kind.plural,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=_WATCH_SECONDS,
        ):
            if stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
                return
            kind, obj = event.get("type"), event.get("object")
            if kind == "ERROR":
                raise RuntimeError(f"watch error: {obj}")  # e.g. 410 Gone: relist
            if not isinstance(obj, Mapping) or kind == "BOOKMARK":
                continue
            self.apply(str(kind), obj)
        raise RuntimeError("watch ended")  # the server closed it: relist, then watch again

    def apply(self, kind: str, obj: Object) -> None:
        """One watch event (ADDED, MODIFIED or DELETED)."""
        namespace, name = _key(obj)
        with self._lock:
            if kind == "DELETED":
                self._objects.pop((namespace, name), None)
                self._by_namespace.get(namespace, {}).pop(name, None)
            else:
                self._objects[(namespace, name)] = obj
                self._by_namespace.setdefault(namespace, {})[name] = obj
            if self._claims is not None:
                self._claims.drop(namespace, name)
                for claim in claims_of([obj] if kind != "DELETED" else []):
                    self._claims.put(namespace, claim)


class ClusterCache:
    """The `ClusterView` the server uses: caches for classes and sets, live reads on a miss."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.api = client.CustomObjectsApi(api_client)
        self.caches = {kind.kind: KindCache(self.api, kind) for kind in CACHED_KINDS}
        self._stop = threading.Event()

    def start(self) -> None:
        for cache in self.caches.values():
            thread = threading.Thread(
                target=cache.run, args=(self._stop,), name=f"cache-{cache.kind.plural}", daemon=True
            )
            thread.start()

    def stop(self) -> None:
        self._stop.set()

    def synced(self) -> bool:
        return all(cache.synced.is_set() for cache in self.caches.values())

    async def get_class(self, namespace: str, name: str, budget: float) -> Object | None:
        cache = self.caches["VirtualTargetClass"]
        found = cache.get(namespace, name)
        if found is not None:
            return found
        kind = cache.kind
        found = await _live(
            lambda: self.api.get_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, _request_timeout=budget
            ),
            budget,
            not_found=None,
        )
        return found if isinstance(found, Mapping) else None

    async def sets_using_class(self, namespace: str, name: str, budget: float) -> list[str]:
        """The cache answers "not in use" alone; "in use" is read again live before a
        refusal, as the cache may not yet have seen a set deleted a moment before (as
        `kubectl delete -f examples/` deletes the set, then its class)."""
        cache = self.caches["ExporterSet"]
        if cache.synced.is_set() and not sets_using(cache.values_in(namespace), namespace, name):
            return []
        return sets_using(await self._list(cache.kind, namespace, budget), namespace, name)

    async def sets_of(self, namespace: str, budget: float) -> list[Object]:
        cache = self.caches["ExporterSet"]
        if cache.synced.is_set():
            return cache.values_in(namespace)
        return await self._list(cache.kind, namespace, budget)

    async def overlapping_sets(
        self, namespace: str, claim: PoolClaim, budget: float
    ) -> list[PoolClaim]:
        cache = self.caches["ExporterSet"]
        if cache.synced.is_set():
            return cache.overlapping(namespace, claim)
        return overlapping_claims(await self._list(cache.kind, namespace, budget), claim)

    async def pool_instances(
        self, namespace: str, set_name: str, budget: float
    ) -> tuple[list[Object], list[Object]]:
        """Read live, both at once: asked only when a set is deleted."""
        exporters, leases = INSTANCE_KINDS
        selector = f"{SET_LABEL}={set_name}"
        found = await asyncio.gather(
            self._list(exporters, namespace, budget, selector),
            self._list(leases, namespace, budget),
        )
        return found[0], found[1]

    async def _list(
        self, kind: Kind, namespace: str, budget: float, selector: str | None = None
    ) -> list[Object]:
        listing = await _live(
            lambda: self.api.list_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                label_selector=selector,
                _request_timeout=budget,
            ),
            budget,
            not_found={"items": []},  # a kind not served (Jumpstarter's Lease CRD absent)
        )
        items = listing.get("items", []) if isinstance(listing, Mapping) else []
        return [item for item in items if isinstance(item, Mapping)]


async def _live(call: Any, budget: float, not_found: Any) -> Any:
    """Run a blocking client call in a thread, within `budget` seconds."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(call), budget)
    except ApiException as exc:
        if exc.status == 404:
            return not_found
        raise ClusterUnavailable(f"apiserver answered {exc.status} {exc.reason}") from None
    except TimeoutError:
        raise ClusterUnavailable(f"apiserver did not answer within {budget:.1f}s") from None
    except Exception as exc:  # urllib3 connection errors and the like
        # The client's own read timeout is the same budget, and may fire first.
        if _read_timed_out(exc):
            raise ClusterUnavailable(f"apiserver did not answer within {budget:.1f}s") from None
        raise ClusterUnavailable(f"apiserver unreachable: {_short(exc)}") from None


def _read_timed_out(exc: BaseException) -> bool:
    reason = exc.reason if isinstance(exc, MaxRetryError) else exc
    return isinstance(reason, ReadTimeoutError)


def _claims_of(objects: Mapping[tuple[str, str], Object]) -> ClaimIndex:
    """The claim index of the sets listed (those being deleted left out)."""
    index = ClaimIndex()
    for (namespace, _), obj in objects.items():
        for claim in claims_of([obj]):
            index.put(namespace, claim)
    return index


def _key(obj: Object) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
