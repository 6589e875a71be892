"""Every Kubernetes API call the reconciler makes, in one table.

`ACCESS` is read three ways: the deploy RBAC is generated from it (for each install scope,
`reconciler.runtime.scope`), the runtime builds its list-and-watch caches from the
resources in `WATCHED`, and `reconciler.runtime.kube` refuses (before sending) any call
whose verb the table does not grant in the scope it runs in, so the table cannot drift
from the code. What a provisioner's own resources need (`Provisioner.watches`) is
`provisioned_access` of them, granted beside the table only where a provisioner declares
some. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from api.access import CLUSTER, NAMESPACED, SCRAPE_REVIEWS, Permission

__all__ = [
    "ACCESS",
    "CLASSES",
    "CONFIGMAPS",
    "ELECTION_LEASES",
    "EVENTS",
    "EXPORTERS",
    "EXPORTERSETS",
    "JUMPSTARTER_LEASES",
    "MEMORY_LEASES",
    "NODES",
    "PODS",
    "REVIEWS",
    "SECRETS",
    "WATCHED",
    "Resource",
    "allowed",
    "provisioned_access",
    "target_access",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a resource lives in the API: group ("" for core), version and plural."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


EXPORTERSETS = Resource("virtualtarget.jumpstarter.dev", "v1alpha1", "exportersets", "ExporterSet")
CLASSES = Resource(
    "virtualtarget.jumpstarter.dev", "v1alpha1", "virtualtargetclasses", "VirtualTargetClass"
)
EXPORTERS = Resource("jumpstarter.dev", "v1alpha1", "exporters", "Exporter")
JUMPSTARTER_LEASES = Resource("jumpstarter.dev", "v1alpha1", "leases", "Lease")
PODS = Resource("", "v1", "pods", "Pod")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
ELECTION_LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
# The pools' memory in a namespaced install: a coordination Lease beside each set.
MEMORY_LEASES = ELECTION_LEASES
# Core v1 Events, as controller-runtime's recorder writes them: the Role of Jumpstarter's
# operator grants `events` in the core group only (`kubectl get events.events.k8s.io`
# shows them too, `note` being their `message`).
EVENTS = Resource("", "v1", "events", "Event")
NODES = Resource("", "v1", "nodes", "Node")
TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview")
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview"
)
# By API path, as `scrape.auth` asks for them.
REVIEWS = {r.path(): r for r in (TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS)}

_READ = ("get", "list", "watch")

ACCESS: tuple[Permission, ...] = (
    # the pools: read, and (cluster-wide installs) the surplus-since and backoff
    # annotations; a namespaced install keeps that memory in a Lease beside the set
    # instead, so it needs no write to the set itself, as under the Role of Jumpstarter's
    # operator
    Permission(EXPORTERSETS.group, "exportersets", _READ),
    Permission(EXPORTERSETS.group, "exportersets", ("patch",), modes=(CLUSTER,)),
    Permission(EXPORTERSETS.group, "exportersets/status", ("patch",)),
    Permission(CLASSES.group, "virtualtargetclasses", _READ),
    # the instances: created, fenced, annotated, detached (Retain), deleted
    Permission(EXPORTERS.group, "exporters", (*_READ, "create", "patch", "delete")),
    # pending Leases scale WaitForFirstConsumer pools; live reads guard every delete
    Permission(JUMPSTARTER_LEASES.group, "leases", _READ),
    # the workload of each instance
    Permission(PODS.group, "pods", (*_READ, "create", "patch", "delete")),
    # the nodes of the instances' Pods, to tell when one is lost (`pool.model.nodes`):
    # cluster-wide installs only (Nodes are cluster-scoped, beyond the Role of Jumpstarter's
    # operator that a namespaced install keeps to)
    Permission(NODES.group, "nodes", _READ, cluster_scoped=True, modes=(CLUSTER,)),
    # each instance's config Secret, and the token Jumpstarter's controller issued in the
    # Secret an Exporter's status names (a name known only at run time, so no
    # resourceNames). RBAC cannot restrict a list or watch by label, so `list` and `watch`
    # come only from the Roles of a namespaced install (a rotated token reaches the config
    # Secret at once); a cluster-wide install reads both kinds by name, again every resync
    # period (`reconciler.runtime.named`). Either cache keeps only the `token` and
    # `config.yaml` keys of a Secret.
    Permission(SECRETS.group, "secrets", ("get", "create", "update")),
    Permission(SECRETS.group, "secrets", ("list", "watch"), modes=(NAMESPACED,)),
    # the CA bundle of the config: the class's caBundleConfigMapRef or the one a
    # Jumpstarter install publishes (the cache keeps only PEM certificate values)
    Permission(CONFIGMAPS.group, "configmaps", _READ),
    # what it did to a pool, for `kubectl describe`
    Permission(EVENTS.group, "events", ("create",)),
    # leader election, in the reconciler's own namespace only
    Permission(ELECTION_LEASES.group, "leases", ("get", "create", "update"), own_namespace=True),
    # the pools' memory in a namespaced install (`reconciler.runtime.memory`)
    Permission(MEMORY_LEASES.group, "leases", ("get", "create", "patch"), modes=(NAMESPACED,)),
    # `/metrics` only for callers the apiserver authenticates and authorizes (scrape.auth)
    *SCRAPE_REVIEWS,
)

WATCHED: tuple[Resource, ...] = (
    EXPORTERSETS,
    CLASSES,
    EXPORTERS,
    JUMPSTARTER_LEASES,
    PODS,
    SECRETS,
    CONFIGMAPS,
)


def provisioned_access(watches: Iterable[Resource]) -> tuple[Permission, ...]:
    """The calls on a provisioner's own resources (`Provisioner.watches`): read into a
    cache over the install's scope, and deleted where its `cleanup` names them."""
    return tuple(Permission(r.group, r.plural, (*_READ, "delete")) for r in watches)


def target_access(resources: Iterable[Resource]) -> tuple[Permission, ...]:
    """The calls on the objects an instance has on a target cluster
    (`Provisioner.remote`), made with the kubeconfig of its class's credentials Secret:
    read into a cache, created, labelled (one adopted from Jumpstarter's own provisioner)
    and deleted, in the target namespace."""
    verbs = (*_READ, "create", "patch", "delete")
    return tuple(Permission(r.group, r.plural, verbs) for r in resources)


def allowed(
    resource: Resource,
    verb: str,
    sub: str = "",
    mode: str = CLUSTER,
    provisioned: Iterable[Permission] = (),
) -> bool:
    """The table, or `provisioned` (`provisioned_access`), grants `verb` on the resource
    (or its subresource) in install scope `mode`."""
    plural = f"{resource.plural}/{sub}" if sub else resource.plural
    return any(
        p.api_group == resource.group
        and p.resource == plural
        and verb in p.verbs
        and p.applies(mode)
        for p in (*ACCESS, *provisioned)
    )
