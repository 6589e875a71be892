"""The planner's `Observation` of one set, assembled from the caches in one place.

For one ExporterSet: the pool view with its memory and the status this process last
wrote, the problem that stops its scaling (no class, unusable parameters), its owned
Exporters, its Pods with this process's deletes applied, the Leases that name or may
match its instances, the other sets the claim rule weighs against it (rivals), the lost
nodes under its Pods, its instances' objects of the provisioner's own resources, its
instances' credentials and its images' condition. Everything is read through the cache
indexes, so observing a set costs the size of its pool, not of the cluster.

It writes nothing: its only read past the caches is the quorum list of a doubted set's
Exporters (`reconciler.runtime.expectations`), through `LiveReader`; the pool's memory
comes through `MemoryReader`. (`.importlinter` holds it to that: no API client, no
executor.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from api.imagepolicy import ImagePolicy
from pool.model.access import CLASSES, EXPORTERS, NODES, PODS, Resource
from pool.model.adapt import class_view, controller_of, pool_view, remembered
from pool.model.keys import SET_LABEL, instance_labels
from pool.model.nodes import GONE
from pool.model.reasons import CLASS_NOT_FOUND, INVALID_PARAMETERS
from pool.model.remote import with_remote_failures
from pool.model.status import ConditionSpec
from pool.model.views import (
    LeaseView,
    Observation,
    PodView,
    PoolClaim,
    PoolView,
    ProvisionedView,
)
from pool.rendering.imagecheck import images_condition
from pool.rendering.provisioners.base import Provisioner, Remote, TargetRef, target_of
from pool.rendering.render import Credentials, merged_parameters
from pool.rules.claims import matches
from pool.rules.planner import Plan
from reconciler.runtime.cache import Informer, ObjKey, meta_of
from reconciler.runtime.claims import Claims
from reconciler.runtime.credentials import InstanceCredentials
from reconciler.runtime.expectations import EXPORTER, POD, POD_DELETED, Expectations

__all__ = ["LiveReader", "MemoryReader", "Observed", "Observer", "lost_nodes"]

Obj = dict[str, Any]


class LiveReader(Protocol):
    """A quorum list (`reconciler.runtime.kube.Kube.list`)."""

    def list(
        self, resource: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[Obj], str]: ...


class RemoteReader(Protocol):
    """The caches of a provisioner's target clusters (`reconciler.runtime.targets`)."""

    remote: Remote

    def observe(
        self, key: ObjKey, ref: TargetRef
    ) -> tuple[dict[str, tuple[ProvisionedView, ...]], bool]: ...


class MemoryReader(Protocol):
    """The pool memory a namespaced install keeps (`reconciler.runtime.memory`)."""

    def read(self, exporter_set: Obj) -> Mapping[str, str] | None: ...


@dataclass(frozen=True)
class Observed:
    """What a pass observed of one set: the planner's input, the set's class, and the
    credentials of its instances by Exporter name (or why they have none yet), worked out
    once for the plan and its steps."""

    observation: Observation
    klass: Obj | None
    credentials: Mapping[str, Credentials | str]


@dataclass
class Observer:
    """What observing reads: the caches, the claims, the credentials, this process's
    expectations and last plans (what an auto warm buffer learned), and the memory."""

    provisioner: Provisioner
    watches: Mapping[Resource, Informer]
    claims: Claims
    credentials: InstanceCredentials
    expectations: Expectations
    plans: Mapping[ObjKey, Plan]
    live: LiveReader
    memory: MemoryReader | None = None
    image_policy: ImagePolicy | None = None  # the administrator's allow-list; None: any
    targets: RemoteReader | None = None  # where the provisioner's instances live beyond here

    def observe(self, exporter_set: Obj) -> Observed | str:
        """The planner's input for one set, with its class and the credentials of its
        instances; or, when the set gets no plan from this process, why."""
        meta = meta_of(exporter_set)
        if meta.get("deletionTimestamp"):
            # (garbage collection; a leased instance is held by its lease protection)
            return "being deleted; its instances go with it, a leased one when its lease ends"
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid")
        class_name = (exporter_set.get("spec") or {}).get("virtualTargetClassName", "")
        klass = self.watches[CLASSES].get(namespace, class_name)
        theirs = ((klass or {}).get("spec") or {}).get("provisioner")
        if klass is not None and theirs != self.provisioner.name:
            return f"its class names provisioner {theirs}, not {self.provisioner.name}"
        key = (namespace, name)
        pool, problem = self.pool_view(exporter_set, klass)
        exporters = self.watches[EXPORTERS]
        owned = tuple(exporters.derived_by_index("owner", uid))
        # One snapshot for both sides: a create the cache shows only after `owned` was
        # read must stay expected, or the pass counts it nowhere and creates it again.
        owned_names = frozenset(e.name for e in owned)
        if self.expectations.doubted(key):
            self._expect_live(key, str(uid))
            self.expectations.resolved(key)
        credentials: dict[str, Credentials | str] = {}
        if klass is not None:
            for exporter in exporters.by_index("owner", uid):
                credentials[meta_of(exporter).get("name", "")] = self.credentials.of(
                    exporter, klass
                )
        pods = self.pods(key)
        provisioned = self.provisioned(key)
        if self.targets is not None and klass is not None:
            pods, provisioned = self._there(key, exporter_set, klass, pods, provisioned)
        with_pods = {pod.owner_uid for pod in pods}
        labels = instance_labels(name, pool.template_labels)
        leases = self.leases(namespace, labels, owned)
        observation = Observation(
            pool=pool,
            klass=class_view(klass) if klass is not None else None,
            exporters=owned,
            pods=pods,
            leases=leases,
            problem=problem,
            awaiting={n: found for n, found in credentials.items() if isinstance(found, str)},
            expected_exporters=self.expectations.pending(key, EXPORTER, owned_names.__contains__),
            expected_pods=self.expectations.pending(key, POD, with_pods.__contains__),
            images=self._images(exporter_set, klass),
            rivals=self.rivals(namespace, name, labels, leases),
            lost_nodes=lost_nodes(self.watches.get(NODES), pods),
            provisioned=provisioned,
        )
        return Observed(observation, klass, credentials)

    def _there(
        self,
        key: ObjKey,
        exporter_set: Obj,
        klass: Obj,
        pods: tuple[PodView, ...],
        provisioned: dict[str, tuple[ProvisionedView, ...]],
    ) -> tuple[tuple[PodView, ...], dict[str, tuple[ProvisionedView, ...]]]:
        """The set's objects on its target cluster beside its own, and its Pods as the
        planner sees them when those failed (`pool.model.remote`)."""
        assert self.targets is not None
        remote = self.targets.remote
        ref = target_of(remote, exporter_set, klass)
        if ref is None:
            return pods, provisioned
        there, watched = self.targets.observe(key, ref)
        merged = {n: provisioned.get(n, ()) + there.get(n, ()) for n in {*provisioned, *there}}
        pods = with_remote_failures(pods, there, remote.resources[0], watched)
        return pods, dict(sorted(merged.items()))

    def pool_view(
        self, exporter_set: Obj, klass: Obj | None
    ) -> tuple[PoolView, tuple[str, str] | None]:
        """The set as the planner sees it, with its memory and the status this process
        last wrote, and the problem that stops its scaling, if any."""
        meta = meta_of(exporter_set)
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        pool, problem = pool_view(exporter_set)
        if self.memory is not None:
            held = self.memory.read(exporter_set)
            if held is not None:  # else the set's own annotations (a takeover)
                pool = replace(pool, **remembered(held))
        # The status this process last wrote, while the cache has not shown it yet: a
        # transition is noted (and its Event written) once.
        last = self.plans.get((namespace, name))
        pool = replace(
            pool,
            status=self.expectations.status(
                (namespace, name), str(meta.get("resourceVersion", "")), pool.status
            ),
            # what a `warm-buffer: auto` pool's last pass learned of its demand
            learned=last.learned if last is not None else None,
        )
        if klass is None:
            class_name = (exporter_set.get("spec") or {}).get("virtualTargetClassName", "")
            problem = problem or (
                CLASS_NOT_FOUND,
                f'VirtualTargetClass "{class_name}" not found in namespace "{namespace}"',
            )
        elif problem is None:
            checked = self.provisioner.check_parameters(
                merged_parameters(exporter_set, klass), merged=True
            )
            if checked.errors:
                problem = (INVALID_PARAMETERS, "; ".join(map(str, checked.errors)))
        return pool, problem

    def pods(self, key: ObjKey) -> tuple[PodView, ...]:
        """The set's Pods as cached, those this process deleted already terminating
        (the pass right after a delete would otherwise plan it again)."""
        pods = tuple(self.watches[PODS].derived_by_index("set", key))
        terminating = {pod.uid: pod.deleting for pod in pods}
        deleted = self.expectations.pending(
            key, POD_DELETED, lambda uid: terminating.get(uid, True)
        )
        if not deleted:
            return pods
        return tuple(replace(p, deleting=True) if p.uid in deleted else p for p in pods)

    def provisioned(self, key: ObjKey) -> dict[str, tuple[ProvisionedView, ...]]:
        """The set's objects of the provisioner's own resources (`Provisioner.watches`)
        by instance (Exporter name), each instance's in a stable order."""
        found: dict[str, list[ProvisionedView]] = {}
        for resource in self.provisioner.watches:
            for view in self.watches[resource].derived_by_index("set", key):
                found.setdefault(view.instance, []).append(view)
        return {
            name: tuple(sorted(views, key=lambda v: (v.resource.plural, v.name)))
            for name, views in sorted(found.items())
        }

    def leases(
        self, namespace: str, labels: Mapping[str, str], exporters: Iterable[Any]
    ) -> tuple[LeaseView, ...]:
        """What the planner reads of the namespace's Leases for one pool: those naming one
        of its Exporters and those whose selector may match its instances' labels, by name
        (any other Lease is neither its demand nor held by it)."""
        found = {view.name: view for view in self.claims.leases_matching(namespace, labels)}
        for exporter in exporters:
            found.update((v.name, v) for v in self.claims.leases_naming(namespace, exporter.name))
        return tuple(found[name] for name in sorted(found))

    def rivals(
        self, namespace: str, name: str, labels: Mapping[str, str], leases: Iterable[LeaseView]
    ) -> tuple[PoolClaim, ...]:
        """The other sets (not being deleted) that the claim rule may weigh against this
        one: those matching a Lease that matches it; any other set is no rival for any
        Lease it could count (`pool.rules.claims.counts_lease`)."""
        selectors = {
            _canonical(lease.selector): lease.selector
            for lease in leases
            if matches(lease.selector, labels)
        }
        found: dict[str, PoolClaim] = {}
        for selector in selectors.values():
            found.update(
                (c.name, c) for c in self.claims.matching(namespace, selector, unreadable=False)
            )
        found.pop(name, None)
        return tuple(found[other] for other in sorted(found))

    def _images(self, exporter_set: Obj, klass: Obj | None) -> ConditionSpec | None:
        """The set's ImagesAllowed condition; None where no allow-list is set."""
        if self.image_policy is None:
            return None
        defaults = self.provisioner.default_images
        return images_condition(self.image_policy, exporter_set, klass, defaults)

    def _expect_live(self, key: ObjKey, uid: str) -> None:
        """Read the set's Exporters live (a quorum list) and expect those the cache has
        not shown yet (`reconciler.runtime.expectations`: a create without an answer, a
        process that starts leading)."""
        namespace, name = key
        live, _ = self.live.list(EXPORTERS, namespace, f"{SET_LABEL}={name}")
        cache = self.watches[EXPORTERS]
        for exporter in live:
            found = meta_of(exporter).get("name", "")
            if controller_of(exporter) == uid and cache.get(namespace, found) is None:
                self.expectations.expect(key, EXPORTER, found)


def lost_nodes(nodes: Informer | None, pods: tuple[PodView, ...]) -> dict[str, str]:
    """The lost nodes among those of `pods`, with what was seen of each (none where
    this install may not read Nodes: `nodes` None)."""
    if nodes is None:
        return {}
    lost: dict[str, str] = {}
    for name in {pod.node for pod in pods if pod.node}:
        seen = nodes.derived_by_index("name", name)
        if seen and seen[0]:
            lost[name] = seen[0]
        elif not seen and nodes.synced.is_set():
            lost[name] = GONE
    return lost


def _canonical(selector: Mapping[str, Any]) -> str:
    """One text for equal selectors (a busy pool's Leases mostly share one)."""
    return json.dumps(selector, sort_keys=True, default=str)
