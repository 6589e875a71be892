"""The caches one controller reads, made and indexed once.

Every resource of `WATCHED` gets a list-and-watch cache over the install's scope, but
Secrets in a cluster-wide install: RBAC would let such a watch read every Secret of the
cluster, so they are read by name (`reconciler.runtime.named`); Nodes where the install
may read them (cluster-wide), each kept as whether it is lost (`pool.model.nodes`).
What each cache keeps:
the planner's view, derived once per event from the whole object; of the object itself
only what the executor reads (metadata, and for Pods the phase): status and Pod specs
are most of the bytes. Of Secrets and ConfigMaps only the keys a config is rendered
from. The indexes let one pass read its set's objects without scanning the cluster or
its namespace: sets by class; Exporters by owner, set label and credential Secret; Pods
by set; Leases by the Exporter they name and by their selector's anchor (a namespace
of thousands of pools, as Jumpstarter's controller serves one, costs a pass its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.access import NAMESPACED
from pool.model.access import (
    CONFIGMAPS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    NODES,
    PODS,
    SECRETS,
    WATCHED,
    Resource,
    allowed,
)
from pool.model.adapt import (
    controller_of,
    exporter_view,
    lease_view,
    pod_view,
    pod_view_after,
)
from pool.model.keys import NAME_LABEL, SET_LABEL
from pool.model.nodes import node_lost
from pool.rendering.credentials import (
    credential_secret_name,
    keep_certificates,
    keep_credentials,
)
from pool.rules.claimindex import anchor
from reconciler.runtime.cache import Cache, Informer, keep_only, meta_of
from reconciler.runtime.kube import Kube
from reconciler.runtime.named import NamedCache
from reconciler.runtime.scope import Scope

__all__ = ["Caches", "build_caches", "meta_of", "secrets_by_name"]

Obj = dict[str, Any]

# What each cache derives from an object and keeps of it (`Informer`'s keyword arguments).
SHAPES: dict[Resource, dict[str, Any]] = {
    EXPORTERS: {
        "transform": keep_only(
            "spec.enabled", "status.credential", "status.endpoint", "status.leaseRef"
        ),
        "derive": exporter_view,
    },
    SECRETS: {"transform": keep_credentials},
    CONFIGMAPS: {"transform": keep_certificates},
    PODS: {
        "transform": keep_only("status.phase", "spec.nodeName"),
        "derive": pod_view,
        "carry": pod_view_after,
        "label_selector": NAME_LABEL,
    },
    JUMPSTARTER_LEASES: {"derive": lease_view},
    NODES: {"transform": keep_only("status.conditions"), "derive": node_lost},
}


@dataclass(frozen=True)
class Caches:
    watches: dict[Resource, Informer]  # the caches that list and watch
    secrets: Cache  # a watch of Secrets, or the Secrets read by name
    informers: dict[Resource, Cache]  # every resource of WATCHED (and Nodes) -> its cache


def secrets_by_name(scope: Scope) -> bool:
    """Whether the Secret cache reads by name: cluster-wide, where RBAC would otherwise
    let it read every Secret in the cluster (namespaced installs watch theirs)."""
    return scope.mode != NAMESPACED


def build_caches(kube: Kube, scope: Scope, secret_resync: float, secret_budget: float) -> Caches:
    """The caches of `scope`, indexed. A cluster-wide install's safety resync of the
    Secrets it reads by name reads at most `secret_budget` a second in all, none more
    often than every `secret_resync` seconds."""
    by_name = secrets_by_name(scope)
    watches: dict[Resource, Informer] = {
        r: Informer(kube, r, namespaces=scope.namespaces, **SHAPES.get(r, {}))
        if scope.namespaces is not None
        else Informer(kube, r, **SHAPES.get(r, {}))
        for r in WATCHED
        if not (by_name and r == SECRETS)
    }
    if allowed(NODES, "watch", mode=scope.mode):
        watches[NODES] = Informer(kube, NODES, **SHAPES[NODES])
    secrets: Cache = watches[SECRETS] if SECRETS in watches else NamedCache(
        kube,
        SECRETS,
        secret_resync,
        transform=keep_credentials,
        after=watches[EXPORTERS].synced,
        budget=secret_budget,
    )  # fmt: skip
    _index(watches)
    informers: dict[Resource, Cache] = {r: watches.get(r, secrets) for r in WATCHED}
    if NODES in watches:
        informers[NODES] = watches[NODES]
    return Caches(watches, secrets, informers)


def _node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _index(watches: dict[Resource, Informer]) -> None:
    sets, exporters = watches[EXPORTERSETS], watches[EXPORTERS]
    sets.add_index(
        "class",
        lambda o: [
            (meta_of(o).get("namespace"), (o.get("spec") or {}).get("virtualTargetClassName"))
        ],
    )
    exporters.add_index("owner", lambda o: [controller_of(o)] if controller_of(o) else [])
    exporters.add_index(
        "set",
        lambda o: [(meta_of(o).get("namespace"), n)]
        if (n := (meta_of(o).get("labels") or {}).get(SET_LABEL))
        else [],
    )
    exporters.add_index(
        "credential",
        lambda o: [(meta_of(o).get("namespace"), n)] if (n := credential_secret_name(o)) else [],
    )
    watches[PODS].add_index("node", lambda o: [n] if (n := _node_name(o)) else [])
    if NODES in watches:
        watches[NODES].add_index("name", lambda o: [meta_of(o).get("name")])
    watches[PODS].add_index(
        "set",
        lambda o: [(meta_of(o).get("namespace"), (meta_of(o).get("labels") or {}).get(NAME_LABEL))],
    )
    leases = watches[JUMPSTARTER_LEASES]
    # A pass reads the Leases naming its Exporters and those whose selector may match its
    # instances (`pool.rules.claimindex.anchor`), not every Lease of the namespace.
    leases.add_index(
        "exporter",
        lambda o: [(meta_of(o).get("namespace"), n)]
        if (n := (((o.get("status") or {}).get("exporterRef") or {}).get("name")))
        else [],
    )
    leases.add_index(
        "anchor",
        lambda o: [(meta_of(o).get("namespace"), anchor((o.get("spec") or {}).get("selector")))],
    )
