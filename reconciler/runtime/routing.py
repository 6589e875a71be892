"""Event routing: which pools' keys each cache's event wakes, and in which lane.

Every watch event (a set, an Exporter, a Pod, a Node, a Lease, a class, a Secret, a
ConfigMap, an object of the provisioner's own resources) wakes only the pools it
concerns, found through the cache indexes and the claim index, never by passing every
set of a namespace. Waking every pool of the namespace per Lease event cost, with 100
pools in one, a pass of each: passes queued 1.3 s on average and a refill took seconds
(bench/RESULTS.md). A routing handler writes nothing: it queues keys and forgets what
belonged to what is gone.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Protocol

from pool.model.access import (
    CLASSES,
    CONFIGMAPS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    NODES,
    PODS,
)
from pool.model.adapt import lease_view, pool_claim
from pool.model.keys import NAME_LABEL, RETAINED_FROM, SET_LABEL
from pool.model.nodes import node_lost
from pool.rendering.configsync import ConfigSync
from pool.rendering.credentials import ca_source, credential_secret_name
from pool.rules.planner import Plan
from reconciler.runtime.cache import ObjKey, key_of, meta_of
from reconciler.runtime.caches import Caches
from reconciler.runtime.claims import Claims
from reconciler.runtime.credentials import InstanceCredentials, owner_sets
from reconciler.runtime.expectations import Expectations
from reconciler.runtime.lanes import Lane
from reconciler.runtime.memory import MemoryLeases
from reconciler.runtime.named import NamedCache
from reconciler.runtime.workqueue import WorkQueue

__all__ = ["LostInstances", "Router", "pool_keys", "set_key"]

Obj = dict[str, Any]


class LostInstances(Protocol):
    """Where a pool's Exporter deleted while leased is noted (`reconciler.runtime.leftovers`)."""

    def note_if_lost(self, exporter: Obj) -> None: ...


class Router:
    def __init__(
        self,
        queue: WorkQueue[ObjKey],
        caches: Caches,
        claims: Claims,
        credentials: InstanceCredentials,
        *,
        plans: MutableMapping[ObjKey, Plan],
        expectations: Expectations,
        configs: ConfigSync,
        memory: MemoryLeases | None,
        lost: LostInstances,
    ) -> None:
        """What is kept per set or per instance (its last plan, expectations, memory,
        last config) is forgotten here when it goes."""
        self.queue, self.watches, self.secrets = queue, caches.watches, caches.secrets
        self.provisioned = caches.provisioned
        self.claims, self.credentials = claims, credentials
        self.plans, self.expectations, self.configs = plans, expectations, configs
        self.memory, self.lost = memory, lost

    def subscribe(self) -> None:
        """Route each cache's events to the pools they concern."""
        exporters = self.watches[EXPORTERS]
        self.watches[EXPORTERSETS].add_handler(self.on_set)
        if isinstance(self.secrets, NamedCache):
            exporters.add_handler(self.credentials.track)  # first: a pass may read them
        exporters.add_handler(self.on_owned)
        for labelled in (PODS, *self.provisioned):
            self.watches[labelled].add_handler(self.on_labelled)
        self.watches[JUMPSTARTER_LEASES].add_handler(self.on_lease)
        self.watches[CLASSES].add_handler(self.on_class)
        self.secrets.add_handler(self.on_secret)
        self.watches[CONFIGMAPS].add_handler(self.on_configmap)
        if NODES in self.watches:
            self.watches[NODES].add_handler(self.on_node)

    def on_set(self, kind: str, new: Obj, old: Obj | None) -> None:
        key = set_key(new)
        if kind == "DELETED":
            self.plans.pop(key, None)  # its metric series go with it
            if self.memory is not None:
                self.memory.forget(str(meta_of(new).get("uid", "")))
            self.expectations.forget(key)
        self.queue.add(key)
        if old is None or kind == "DELETED" or _claim_changed(old, new):
            # Which set counts a Lease the set matches (matched) may have changed: wake the
            # sets those Leases match, and only them (`pool.rules.claims`).
            going = kind == "DELETED" or meta_of(new).get("deletionTimestamp")
            for claim in self.claims.update(key, None if going else new):
                for lease in self.claims.leases_matching(key[0], claim.labels):
                    for other in self.claims.matching(key[0], lease.selector, unreadable=True):
                        self.queue.add((key[0], other.name))

    def on_owned(self, kind: str, new: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            self.configs.forget(*key_of(new))
            self.lost.note_if_lost(new)
        # Credentials just issued: the instance's Pod is what a lease may be waiting for.
        lane = Lane.PODS if _issued(new) and (old is None or not _issued(old)) else Lane.ORDINARY
        for obj in (new, old):
            if obj is not None:
                for key in pool_keys(obj):
                    self.queue.add(key, lane)

    def on_labelled(self, _kind: str, new: Obj, old: Obj | None) -> None:
        """A Pod, or an object of the provisioner's own resources: wake the set its
        NAME_LABEL names, before and after."""
        for obj in (new, old):
            name = (meta_of(obj).get("labels") or {}).get(NAME_LABEL) if obj else None
            if obj is not None and name:
                self.queue.add((meta_of(obj).get("namespace", ""), name))

    def on_node(self, kind: str, new: Obj, old: Obj | None) -> None:
        """A node lost, back, or gone: wake the pools with a Pod on it (a heartbeat that
        changes neither wakes none)."""
        if kind != "DELETED" and old is not None and node_lost(new) == node_lost(old):
            return
        for pod in self.watches[PODS].by_index("node", meta_of(new).get("name")):
            if name := (meta_of(pod).get("labels") or {}).get(NAME_LABEL):
                self.queue.add((meta_of(pod).get("namespace", ""), name))

    def on_lease(self, _kind: str, new: Obj, old: Obj | None) -> None:
        """Wake the pools a Lease concerns: the one owning the Exporter it names (now or
        before) and those its selector matches (it is pending for them, or was), found by
        the claim index's labels, not by matching every set of the namespace. In the
        refill lane: a Lease takes capacity, so the refill it may call for goes first."""
        namespace = meta_of(new).get("namespace", "")
        views = [lease_view(lease) for lease in (new, old) if lease is not None]
        exporters = self.watches[EXPORTERS]
        for view in views:
            exporter = exporters.get(namespace, view.exporter) if view.exporter else None
            for key in pool_keys(exporter) if exporter is not None else ():
                self.queue.add(key, Lane.REFILL)
        for view in views:
            for claim in self.claims.matching(namespace, view.selector, unreadable=True):
                self.queue.add((namespace, claim.name), Lane.REFILL)

    def on_class(self, _kind: str, new: Obj, _old: Obj | None) -> None:
        key = (meta_of(new).get("namespace"), meta_of(new).get("name"))
        for exporter_set in self.watches[EXPORTERSETS].by_index("class", key):
            self.queue.add(set_key(exporter_set))

    def on_secret(self, kind: str, new: Obj, _old: Obj | None) -> None:
        """A credential Secret (token issued or rotated) wakes the pools of the Exporters
        naming it (a new one in the Pods lane); a config Secret (changed or deleted by
        someone) wakes its own pool."""
        namespace = meta_of(new).get("namespace", "")
        lane = Lane.PODS if kind == "ADDED" else Lane.ORDINARY
        for exporter in self.watches[EXPORTERS].by_index("credential", key_of(new)):
            for key in owner_sets(exporter):
                self.queue.add(key, lane)
        owner = (meta_of(new).get("labels") or {}).get(NAME_LABEL)
        if owner:
            self.queue.add((namespace, owner))

    def on_configmap(self, _kind: str, new: Obj, _old: Obj | None) -> None:
        """A CA bundle changed: wake the pools whose class trusts that ConfigMap (the sets
        of those classes, by the class index: the namespace's classes are few)."""
        namespace, name = key_of(new)
        for klass in self.watches[CLASSES].items():
            meta = meta_of(klass)
            if meta.get("namespace") == namespace and ca_source(klass)[0] == name:
                for exporter_set in self.watches[EXPORTERSETS].by_index(
                    "class", (namespace, meta.get("name"))
                ):
                    self.queue.add(set_key(exporter_set))


def set_key(obj: Obj) -> ObjKey:
    meta = meta_of(obj)
    return meta.get("namespace", ""), meta.get("name", "")


def pool_keys(exporter: Obj) -> set[ObjKey]:
    """The sets an Exporter concerns: its controller set, and the one its set label names
    (the same while the set controls it; after a deletion or an orphaning only the label
    is left, and its lease protection is still looked after: `reconciler.runtime.leftovers`);
    for one a Retain pool let go, the set it came from (its objects on a target cluster
    are that set's sweep's once it is deleted: `reconciler.runtime.targets`)."""
    keys = set(owner_sets(exporter))
    meta = meta_of(exporter)
    namespace = meta.get("namespace", "")
    for name in ((meta.get("labels") or {}).get(SET_LABEL),
                 (meta.get("annotations") or {}).get(RETAINED_FROM)):  # fmt: skip
        if name:
            keys.add((namespace, name))
    return keys


def _claim_changed(old: Obj, new: Obj) -> bool:
    """What the claim rule reads of a set changed (its labels, selector, deletion)."""
    return pool_claim(old) != pool_claim(new) or bool(
        meta_of(old).get("deletionTimestamp")
    ) != bool(meta_of(new).get("deletionTimestamp"))


def _issued(exporter: Obj) -> bool:
    """Jumpstarter's controller has issued the Exporter's credentials (in its status)."""
    status = exporter.get("status") or {}
    return bool(credential_secret_name(exporter) and status.get("endpoint"))
