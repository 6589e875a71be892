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
The provisioner's own resources (`Provisioner.watches`) get a cache each, of the objects
labelled with a set and an instance, kept as their views and indexed by set as Pods are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
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
    provisioned_view,
)
from pool.model.keys import INSTANCE_LABEL, NAME_LABEL, SET_LABEL
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
    informers: dict[Resource, Cache]  # every resource cached (WATCHED, Nodes, provisioned)
    provisioned: tuple[Resource, ...] = ()  # the provisioner's own, among `watches`


def _provisioned_shape(resource: Resource) -> dict[str, Any]:
    """A provisioner's own resource: its objects labelled with a set and an instance
    (`InstanceContext.provisioned_labels`), their metadata and views kept."""
    return {
        "transform": keep_only(),
        "derive": partial(provisioned_view, resource),
        "label_selector": f"{NAME_LABEL},{INSTANCE_LABEL}",
    }


def secrets_by_name(scope: Scope) -> bool:
    """Whether the Secret cache reads by name: cluster-wide, where RBAC would otherwise
    let it read every Secret in the cluster (namespaced installs watch theirs)."""
    return scope.mode != NAMESPACED


def build_caches(
    kube: Kube,
    scope: Scope,
    secret_resync: float,
    secret_budget: float,
    provisioned: Sequence[Resource] = (),
) -> Caches:
    """The caches of `scope`, indexed, with one for each of the provisioner's own
    resources (`provisioned`: `Provisioner.watches`). A cluster-wide install's safety
    resync of the Secrets it reads by name reads at most `secret_budget` a second in all,
    none more often than every `secret_resync` seconds."""
    if taken := [r.plural for r in provisioned if r in (*WATCHED, NODES)]:
        raise ValueError(f"a provisioner watches only resources of its own, not {taken}")
    by_name = secrets_by_name(scope)
    shapes = {r: SHAPES.get(r, {}) for r in WATCHED if not (by_name and r == SECRETS)}
    shapes.update((r, _provisioned_shape(r)) for r in provisioned)
    watches = {r: Informer(kube, r, namespaces=scope.namespaces, **s) for r, s in shapes.items()}
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
    _index(watches, provisioned)
    informers: dict[Resource, Cache] = {r: watches.get(r, secrets) for r in WATCHED}
    informers.update((r, watches[r]) for r in (NODES, *provisioned) if r in watches)
    return Caches(watches, secrets, informers, tuple(provisioned))


def _node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _labelled_set(obj: Obj) -> list[tuple[str, str | None]]:
    """The set an instance's Pod or provisioned object names (NAME_LABEL), by key."""
    meta = meta_of(obj)
    return [(meta.get("namespace", ""), (meta.get("labels") or {}).get(NAME_LABEL))]


def _index(watches: dict[Resource, Informer], provisioned: Sequence[Resource]) -> None:
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
    for labelled in (PODS, *provisioned):
        watches[labelled].add_index("set", _labelled_set)
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
