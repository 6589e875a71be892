"""The runtime loop: caches feed a keyed work queue, each key is planned and executed.

One `sync` is one pass over one ExporterSet: read its objects from the caches (through
indexes, so a pass costs the size of the pool, not of the cluster), build the
observation, call the pure planner, let the executor make the writes, and requeue at
the next cooldown deadline the planner reports. Failures back off per key. Each pass
that acts logs the steps it carried out in the planner's words
(`pool.rules.explain`); a step that fails for good still gets its pass's status
written (`reconciler.runtime.failures`).

The caches are made and indexed once (`reconciler.runtime.caches`); what every pass
works with is one `Runtime` value, what one pass is about one `Pass`
(`reconciler.runtime.executor`): the credentials of a pool's instances are worked out
once per pass, when it observes the pool (and for an instance whose Secrets it reads
once more before creating its Pod, from what it read).

`virtualtarget plan` uses the same pieces read-only: `snapshot` fills the caches with
one list each (no watch), and `decide` is the reading and planning half of `sync`.

Scope (`reconciler.runtime.scope`): the caches cover one namespace, a list, or the
cluster; in a cluster-wide install Secrets are read by name (`reconciler.runtime.named`):
an instance's two Secrets once its credentials are issued, again when its status names
another credential Secret and right before its Pod is created, besides a slow resync
within a total budget of reads a second. In a namespaced install the pool's memory
(cooldown, backoff) is a Lease beside each set (`reconciler.runtime.memory`).

Provisioner: a set is handled when its class names this process's provisioner, or when its
class is missing (then only its status is written, saying so; every reconciler writes
the same words, so several provisioners never flap over it).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any

from api.access import NAMESPACED
from api.imagepolicy import ImagePolicy
from api.provisioners.check import check_parameters
from pool.model.access import (
    CLASSES,
    CONFIGMAPS,
    EVENTS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    NODES,
    PODS,
)
from pool.model.actions import Action, CreateExporter, CreatePod, PatchStatus, RecordEvent
from pool.model.adapt import (
    class_view,
    controller_of,
    exporter_view,
    lease_view,
    pool_claim,
    pool_view,
    remembered,
)
from pool.model.demand import DemandMemory
from pool.model.jumpstarter import config_secret_name
from pool.model.keys import LEASE_PROTECTION, NAME_LABEL, SET_LABEL, instance_labels
from pool.model.nodes import GONE, node_lost
from pool.model.reasons import (
    CLASS_NOT_FOUND,
    INSTANCE_KEPT,
    INSTANCE_LOST,
    INSTANCE_RELEASED,
    INVALID_PARAMETERS,
)
from pool.model.views import LeaseView, Observation, PodView, PoolClaim, PoolView
from pool.rendering.configsync import ConfigSync
from pool.rendering.credentials import (
    ca_source,
    credential_secret_name,
    resolve,
)
from pool.rendering.imagecheck import images_condition
from pool.rendering.provisioners.base import Provisioner
from pool.rendering.render import Credentials, merged_parameters
from pool.rules.claimindex import ClaimIndex, anchors_of
from pool.rules.claims import matches
from pool.rules.explain import UPDATE_STATUS, held, steps
from pool.rules.planner import Plan, plan
from pool.rules.protection import busy_lease, leased_names, verdict
from pool.rules.steps import Wait
from reconciler.runtime.cache import ObjKey, key_of
from reconciler.runtime.caches import build_caches
from reconciler.runtime.events import build_event
from reconciler.runtime.eventsender import EventSender
from reconciler.runtime.executor import Executor, Pass, Runtime, without_protection
from reconciler.runtime.expectations import EXPORTER, POD, POD_DELETED, Expectations
from reconciler.runtime.failures import StepFailed
from reconciler.runtime.kube import ApiError, Kube, NotLeading
from reconciler.runtime.memory import MemoryLeases
from reconciler.runtime.metrics import ReconcileStats
from reconciler.runtime.named import DEFAULT_BUDGET, DEFAULT_RESYNC, NamedCache
from reconciler.runtime.scope import Scope
from reconciler.runtime.workqueue import WorkQueue

__all__ = ["LANE_STEPS", "Controller", "Lane", "Observed"]

log = logging.getLogger("reconciler.controller")  # stable: log filters select by it


class Lane(IntEnum):
    """The work queue's lanes, the highest served first (`WorkQueue.add`)."""

    ORDINARY = 0
    PODS = 1  # credentials came: the instance's config Secret and Pod
    REFILL = 2  # a Lease took capacity: the replacement instances


# What a pass taken from a lane above the ordinary one carries out.
LANE_STEPS: dict[Lane, type] = {Lane.REFILL: CreateExporter, Lane.PODS: CreatePod}

Obj = dict[str, Any]


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _owner_set(obj: Obj) -> Iterable[ObjKey]:
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == EXPORTERSETS.kind:
            yield _meta(obj).get("namespace", ""), ref.get("name", "")


@dataclass(frozen=True)
class Observed:
    """What a pass observed of one set: the planner's input, the set's class, and the
    credentials of its instances by Exporter name (or why they have none yet), worked out
    once for the plan and its steps."""

    observation: Observation
    klass: Obj | None
    credentials: Mapping[str, Credentials | str]


class Controller:
    def __init__(
        self,
        kube: Kube,
        provisioner: Provisioner,
        namespace: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        workers: int = 2,
        *,
        image_policy: ImagePolicy | None = None,
        scope: Scope | None = None,
        secret_resync: float = DEFAULT_RESYNC,
        secret_budget: float = DEFAULT_BUDGET,
    ) -> None:
        """`scope` (default: `namespace` alone, else the cluster) is what the caches
        cover. A cluster-wide install's safety resync of the Secrets it reads by name
        reads at most `secret_budget` a second in all, none more often than every
        `secret_resync` seconds."""
        self.kube, self.provisioner, self.clock, self.workers = kube, provisioner, clock, workers
        self.image_policy = image_policy  # the administrator's allow-list; None: any image
        if scope is None:
            scope = Scope((namespace,)) if namespace else Scope()
        self.scope = scope
        kube.mode = scope.mode  # the calls the access table grants in this scope
        self.queue: WorkQueue[ObjKey] = WorkQueue()
        self.events = EventSender(kube)  # started by `run`; until then a pass sends its own
        self.writes = 0
        self.configs = ConfigSync()
        self.expectations = Expectations()
        self.reconciles = ReconcileStats()
        # The last plan of each set handled, for the pool metrics; a set that is gone, or
        # is not this provisioner's, has none.
        self.plans: dict[ObjKey, Plan] = {}
        # Lease protection of instances their set no longer controls (`_leftovers`): the
        # uids whose stay was announced, and per set the instances deleted while leased
        # before they were protected, with the lease, for an Event each.
        self._announced: set[str] = set()
        self._lost: dict[ObjKey, list[tuple[Obj, str]]] = {}
        self._lost_lock = threading.Lock()
        self._caches_started = False
        # The namespace's sets as the claim rule sees them, kept by the sets' events (the
        # informer's thread) and read by the passes (the workers'): under `_claims_lock`.
        self.claims = ClaimIndex()
        self._claims_lock = threading.Lock()
        caches = build_caches(kube, scope, secret_resync, secret_budget)
        self.watches, self.secrets = caches.watches, caches.secrets
        self.informers = caches.informers
        # Where the pools' memory lives when the set itself may not be written.
        self.memory = MemoryLeases(kube) if scope.mode == NAMESPACED else None
        self.runtime = Runtime(
            kube,
            provisioner,
            exporters=self.watches[EXPORTERS],
            secrets=self.secrets,
            expectations=self.expectations,
            configs=self.configs,
            memory=self.memory,
            events=self.events,
        )
        self._subscribe()

    def _subscribe(self) -> None:
        """Route each cache's events to the pools they concern."""
        exporters = self.watches[EXPORTERS]
        self.watches[EXPORTERSETS].add_handler(self._on_set)
        if isinstance(self.secrets, NamedCache):
            exporters.add_handler(self._track_secrets)  # first: a pass may read them
        exporters.add_handler(self._on_owned)
        self.watches[PODS].add_handler(self._on_pod)
        self.watches[JUMPSTARTER_LEASES].add_handler(self._on_lease)
        self.watches[CLASSES].add_handler(self._on_class)
        self.secrets.add_handler(self._on_secret)
        self.watches[CONFIGMAPS].add_handler(self._on_configmap)
        if NODES in self.watches:
            self.watches[NODES].add_handler(self._on_node)

    def _learned(self, key: ObjKey) -> DemandMemory | None:
        """What a `warm-buffer: auto` pool's last pass learned of its demand (written to its
        memory once a minute): the next pass starts from it (`PoolView.learned`)."""
        last = self.plans.get(key)
        return last.learned if last is not None else None

    # -- event routing -------------------------------------------------------------------
    def _on_set(self, kind: str, new: Obj, old: Obj | None) -> None:
        key = _key(new)
        if kind == "DELETED":
            self.plans.pop(key, None)  # its metric series go with it
            if self.memory is not None:
                self.memory.forget(str(_meta(new).get("uid", "")))
            self.expectations.forget(key)
        self.queue.add(key)
        if old is None or kind == "DELETED" or _claim_changed(old, new):
            # Which set counts a Lease the set matches (matched) may have changed: wake the
            # sets those Leases match, and only them (`pool.rules.claims`).
            with self._claims_lock:
                before = self.claims.get(*key)
                if kind == "DELETED" or _meta(new).get("deletionTimestamp"):
                    self.claims.drop(*key)
                else:
                    self.claims.put(key[0], pool_claim(new))
                after = self.claims.get(*key)
            for claim in {c.name: c for c in (before, after) if c is not None}.values():
                for lease in self._leases_matching(key[0], claim.labels):
                    for other in self._claims_matching(key[0], lease.selector):
                        self.queue.add((key[0], other.name))

    def _track_secrets(self, kind: str, new: Obj, old: Obj | None) -> None:
        """Read by name the two Secrets of a pool's instance once its credentials are
        issued (before that nothing renders from them): the credential Secret its status
        names, read again whenever that name changes, and its config Secret. This runs
        before the handlers that may plan with them."""
        named = self.secrets
        assert isinstance(named, NamedCache)
        if not any(True for _ in _owner_set(new)):
            return
        namespace, name = key_of(new)
        credential = credential_secret_name(new) if kind != "DELETED" else ""
        before = credential_secret_name(old) if old is not None else ""
        if kind == "DELETED":
            before = credential_secret_name(new)
        if before and before != credential and not self._named_by_exporter(namespace, before):
            named.untrack(namespace, before)
        if kind == "DELETED":
            named.untrack(namespace, config_secret_name(name))
        elif credential:
            named.track(namespace, credential)
            named.track(namespace, config_secret_name(name))

    def _named_by_exporter(self, namespace: str, secret: str) -> bool:
        """Whether a pool's Exporter still names this credential Secret."""
        named = self.watches[EXPORTERS].by_index("credential", (namespace, secret))
        return any(True for exporter in named for _ in _owner_set(exporter))

    def _confirm_secrets(self, namespace: str, actions: Iterable[Any]) -> list[Obj]:
        """An instance's Pod is about to be created, and `jmp run` reads its config once,
        at start: read its two Secrets now (even if read a moment ago: a token rotated
        since, with no event, would otherwise reach no exporter before the next), so the Pod
        starts from what they hold (a rotated token, a config edited by hand). The
        Exporters whose Secrets were read again."""
        named = self.secrets
        if not isinstance(named, NamedCache):
            return []  # watched: the cache is current
        confirmed = []
        for action in actions:
            if not isinstance(action, CreatePod):
                continue
            exporter = self.watches[EXPORTERS].get(namespace, action.exporter)
            credential = credential_secret_name(exporter) if exporter is not None else ""
            if exporter is not None and credential:
                named.confirm(namespace, credential)
                named.confirm(namespace, config_secret_name(action.exporter))
                confirmed.append(exporter)
        return confirmed

    def _pass_credentials(
        self, key: ObjKey, observed: Observed, work: Iterable[Action]
    ) -> dict[str, Credentials | str]:
        """What the pass's steps render from: the credentials its observation found, but
        for the instances whose Secrets are read again before their Pod is created, whose
        credentials are worked out again from what was read."""
        credentials = dict(observed.credentials)
        for exporter in self._confirm_secrets(key[0], work):
            if observed.klass is not None:
                name = _meta(exporter).get("name", "")
                credentials[name] = self.credentials(exporter, observed.klass)
        return credentials

    def _on_owned(self, kind: str, new: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            self.configs.forget(*key_of(new))
            self._note_if_lost(new)
        # Credentials just issued: the instance's Pod is what a lease may be waiting for.
        lane = Lane.PODS if _issued(new) and (old is None or not _issued(old)) else Lane.ORDINARY
        for obj in (new, old):
            if obj is not None:
                for key in _pool_keys(obj):
                    self.queue.add(key, lane)

    def _note_if_lost(self, exporter: Obj) -> None:
        """A pool's Exporter deleted while a lease held it, without the protection (it
        was deleted before the pool could add it): an Event will say so (`_leftovers`)."""
        meta = _meta(exporter)
        set_name = (meta.get("labels") or {}).get(SET_LABEL)
        if not set_name or LEASE_PROTECTION in (meta.get("finalizers") or ()):
            return
        namespace, name = key_of(exporter)
        lease = ((exporter.get("status") or {}).get("leaseRef") or {}).get("name") or next(
            (view.name for view in self._leases_naming(namespace, name) if not view.ended), ""
        )
        if lease:
            with self._lost_lock:
                self._lost.setdefault((namespace, set_name), []).append(
                    (exporter, f"lease {lease}")
                )

    def _on_pod(self, _kind: str, new: Obj, old: Obj | None) -> None:
        for obj in (new, old):
            name = (_meta(obj).get("labels") or {}).get(NAME_LABEL) if obj else None
            if obj is not None and name:
                self.queue.add((_meta(obj).get("namespace", ""), name))

    def _on_node(self, kind: str, new: Obj, old: Obj | None) -> None:
        """A node lost, back, or gone: wake the pools with a Pod on it (a heartbeat that
        changes neither wakes none)."""
        if kind != "DELETED" and old is not None and node_lost(new) == node_lost(old):
            return
        for pod in self.watches[PODS].by_index("node", _meta(new).get("name")):
            if name := (_meta(pod).get("labels") or {}).get(NAME_LABEL):
                self.queue.add((_meta(pod).get("namespace", ""), name))

    def _lost_nodes(self, pods: tuple[PodView, ...]) -> dict[str, str]:
        """The lost nodes among those of `pods`, with what was seen of each (none where
        this install may not read Nodes)."""
        nodes = self.watches.get(NODES)
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

    def _on_lease(self, _kind: str, new: Obj, old: Obj | None) -> None:
        """Wake the pools a Lease concerns: the one owning the Exporter it names (now or
        before) and those its selector matches (it is pending for them, or was), found by
        the claim index's labels, not by matching every set of the namespace. Waking
        every pool of the namespace cost, with 100 pools in one, a pass of each per Lease
        event: passes queued 1.3 s on average and a refill took seconds (bench/RESULTS.md).
        In the refill lane: a Lease takes capacity, so the refill it may call for goes
        first."""
        namespace = _meta(new).get("namespace", "")
        views = [lease_view(lease) for lease in (new, old) if lease is not None]
        exporters = self.watches[EXPORTERS]
        for view in views:
            exporter = exporters.get(namespace, view.exporter) if view.exporter else None
            for key in _pool_keys(exporter) if exporter is not None else ():
                self.queue.add(key, Lane.REFILL)
        for view in views:
            for claim in self._claims_matching(namespace, view.selector):
                self.queue.add((namespace, claim.name), Lane.REFILL)

    def _on_class(self, _kind: str, new: Obj, _old: Obj | None) -> None:
        key = (_meta(new).get("namespace"), _meta(new).get("name"))
        for exporter_set in self.watches[EXPORTERSETS].by_index("class", key):
            self.queue.add(_key(exporter_set))

    def _on_secret(self, kind: str, new: Obj, _old: Obj | None) -> None:
        """A credential Secret (token issued or rotated) wakes the pools of the Exporters
        naming it (a new one in the Pods lane); a config Secret (changed or deleted by
        someone) wakes its own pool."""
        namespace = _meta(new).get("namespace", "")
        lane = Lane.PODS if kind == "ADDED" else Lane.ORDINARY
        for exporter in self.watches[EXPORTERS].by_index("credential", key_of(new)):
            for key in _owner_set(exporter):
                self.queue.add(key, lane)
        owner = (_meta(new).get("labels") or {}).get(NAME_LABEL)
        if owner:
            self.queue.add((namespace, owner))

    def _on_configmap(self, _kind: str, new: Obj, _old: Obj | None) -> None:
        """A CA bundle changed: wake the pools whose class trusts that ConfigMap (the sets
        of those classes, by the class index: the namespace's classes are few)."""
        namespace, name = key_of(new)
        for klass in self.watches[CLASSES].items():
            meta = _meta(klass)
            if meta.get("namespace") == namespace and ca_source(klass)[0] == name:
                for exporter_set in self.watches[EXPORTERSETS].by_index(
                    "class", (namespace, meta.get("name"))
                ):
                    self.queue.add(_key(exporter_set))

    # -- one pass --------------------------------------------------------------------------
    def observe(self, exporter_set: Obj) -> Observed | None:
        """The planner's input for one set, with its class and the credentials of its
        instances; None when the set is not ours to handle."""
        meta = _meta(exporter_set)
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid")
        class_name = (exporter_set.get("spec") or {}).get("virtualTargetClassName", "")
        klass = self.watches[CLASSES].get(namespace, class_name)
        if (
            klass is not None
            and (klass.get("spec") or {}).get("provisioner") != self.provisioner.name
        ):
            return None
        pool, problem = self._pool_view(exporter_set, klass)
        exporters = self.watches[EXPORTERS]
        owned = tuple(exporters.derived_by_index("owner", uid))
        key = (namespace, name)
        if self.expectations.doubted(key):
            self._expect_live(key, str(uid))
            self.expectations.resolved(key)
        credentials: dict[str, Credentials | str] = {}
        if klass is not None:
            for exporter in exporters.by_index("owner", uid):
                credentials[_meta(exporter).get("name", "")] = self.credentials(exporter, klass)
        awaiting = {n: found for n, found in credentials.items() if isinstance(found, str)}
        pods = self._pods((namespace, name))
        with_pods = {pod.owner_uid for pod in pods}
        labels = instance_labels(name, pool.template_labels)
        leases = self._leases(namespace, labels, owned)
        observation = Observation(
            pool=pool,
            klass=class_view(klass) if klass is not None else None,
            exporters=owned,
            pods=pods,
            leases=leases,
            problem=problem,
            awaiting=awaiting,
            expected_exporters=self.expectations.pending(
                key, EXPORTER, lambda n: exporters.get(namespace, n) is not None
            ),
            expected_pods=self.expectations.pending(key, POD, with_pods.__contains__),
            images=images_condition(
                self.image_policy, exporter_set, klass, self.provisioner.default_images
            )
            if self.image_policy is not None
            else None,
            rivals=self._rivals(namespace, name, labels, leases),
            lost_nodes=self._lost_nodes(pods),
        )
        return Observed(observation, klass, credentials)

    def _pods(self, key: tuple[str, str]) -> tuple[PodView, ...]:
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

    def _pool_view(
        self, exporter_set: Obj, klass: Obj | None
    ) -> tuple[PoolView, tuple[str, str] | None]:
        """The set as the planner sees it, with its memory and the status this process
        last wrote, and the problem that stops its scaling, if any."""
        meta = _meta(exporter_set)
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        pool, problem = pool_view(exporter_set)
        if self.memory is not None:
            held = self.memory.read(exporter_set)
            if held is not None:  # else the set's own annotations (a takeover)
                pool = replace(pool, **remembered(held))
        # The status this process last wrote, while the cache has not shown it yet: a
        # transition is noted (and its Event written) once.
        pool = replace(
            pool,
            status=self.expectations.status(
                (namespace, name), str(meta.get("resourceVersion", "")), pool.status
            ),
            learned=self._learned((namespace, name)),
        )
        if klass is None:
            class_name = (exporter_set.get("spec") or {}).get("virtualTargetClassName", "")
            problem = problem or (
                CLASS_NOT_FOUND,
                f'VirtualTargetClass "{class_name}" not found in namespace "{namespace}"',
            )
        elif problem is None:
            errors = check_parameters(
                self.provisioner.name, merged_parameters(exporter_set, klass), merged=True
            ).errors
            if errors:
                problem = (INVALID_PARAMETERS, "; ".join(map(str, errors)))
        return pool, problem

    def _leases(
        self, namespace: str, labels: Mapping[str, str], exporters: Iterable[Any]
    ) -> tuple[LeaseView, ...]:
        """What the planner reads of the namespace's Leases for one pool: those naming one
        of its Exporters and those whose selector may match its instances' labels, by name
        (any other Lease is neither its demand nor held by it)."""
        found = {view.name: view for view in self._leases_matching(namespace, labels)}
        for exporter in exporters:
            found.update((v.name, v) for v in self._leases_naming(namespace, exporter.name))
        return tuple(found[name] for name in sorted(found))

    def _leases_matching(self, namespace: str, labels: Mapping[str, str]) -> list[LeaseView]:
        """The Leases whose selector may match `labels` (under one of its anchors)."""
        cache = self.watches[JUMPSTARTER_LEASES]
        return [
            view
            for pair in anchors_of(labels)
            for view in cache.derived_by_index("anchor", (namespace, pair))
            if matches(view.selector, labels, unreadable=True)
        ]

    def _leases_naming(self, namespace: str, exporter: str) -> list[LeaseView]:
        return self.watches[JUMPSTARTER_LEASES].derived_by_index("exporter", (namespace, exporter))

    def _claims_matching(self, namespace: str, selector: Any) -> list[PoolClaim]:
        """The sets whose instances `selector` matches (a selector no one can read: every
        set, to be woken)."""
        with self._claims_lock:
            return self.claims.matching(namespace, selector, unreadable=True)

    def _rivals(
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
        with self._claims_lock:
            for selector in selectors.values():
                found.update((c.name, c) for c in self.claims.matching(namespace, selector))
        found.pop(name, None)
        return tuple(found[other] for other in sorted(found))

    def _expect_live(self, key: ObjKey, uid: str) -> None:
        """Read the set's Exporters live (a quorum list) and expect those the cache has
        not shown yet (`reconciler.runtime.expectations`: a create without an answer, a
        process that starts leading)."""
        namespace, name = key
        live, _ = self.kube.list(EXPORTERS, namespace, f"{SET_LABEL}={name}")
        cache = self.watches[EXPORTERS]
        for exporter in live:
            found = _meta(exporter).get("name", "")
            if controller_of(exporter) == uid and cache.get(namespace, found) is None:
                self.expectations.expect(key, EXPORTER, found)

    def credentials(self, exporter: Obj, klass: Obj) -> Credentials | str:
        """An Exporter's credentials from the caches, or why it has none yet. A Secret of
        the instance's name that another Exporter controls (an earlier one of that name,
        its config Secret not yet collected) is never taken for this one's."""
        meta = _meta(exporter)
        namespace, uid = meta.get("namespace", ""), meta.get("uid", "")
        secrets = self.secrets
        config_name = config_secret_name(meta.get("name", ""))
        config = secrets.get(namespace, config_name)
        if config is not None and controller_of(config) not in ("", uid):
            return f'Secret "{config_name}" belongs to an earlier Exporter; waiting for it to go'
        credential = secrets.get(namespace, credential_secret_name(exporter))
        if credential is not None and controller_of(credential) not in ("", uid):
            return f'Secret "{credential_secret_name(exporter)}" belongs to another Exporter'
        return resolve(exporter, klass, secrets.get, self.watches[CONFIGMAPS].get)

    def decide(self, exporter_set: Obj, now: datetime) -> tuple[Plan, Observed] | str:
        """The plan for one set at `now`, with what it was made from; or, when the set
        gets no plan from this process, why."""
        if _meta(exporter_set).get("deletionTimestamp"):
            # (garbage collection; a leased instance is held by its lease protection)
            return "being deleted; its instances go with it, a leased one when its lease ends"
        observed = self.observe(exporter_set)
        if observed is None:
            class_name = (exporter_set.get("spec") or {}).get("virtualTargetClassName", "")
            klass = self.watches[CLASSES].get(_meta(exporter_set).get("namespace", ""), class_name)
            theirs = ((klass or {}).get("spec") or {}).get("provisioner")
            return f"its class names provisioner {theirs}, not {self.provisioner.name}"
        return plan(observed.observation, now), observed

    def sync(self, key: ObjKey, lane: Lane = Lane.ORDINARY) -> Plan | None:
        """One pass over the set; in a lane above the ordinary one it carries out only the
        steps that lane is for (the rest of the pass is left to an ordinary one). It logs
        the steps it carried out, and what it holds back (an ordinary pass).

        A step that fails for good (`reconciler.runtime.failures`) ends the pass's work,
        but not its report: the pass is planned again with the failure, and that plan's
        status (Degraded, naming the step, its instance and the error) and Events are
        written; then StepFailed goes to the worker, which retries under the queue's
        backoff. A retry that fails the same way plans the same status: nothing more is
        written."""
        exporter_set = self.watches[EXPORTERSETS].get(*key)
        now = self.clock()
        self._leftovers(key, exporter_set, now)
        decided = self.decide(exporter_set, now) if exporter_set is not None else "gone"
        if exporter_set is None or isinstance(decided, str):
            self.plans.pop(key, None)  # its metric series go with it
            return None
        result, observed = decided
        self.plans[key] = result
        ordinary = lane not in LANE_STEPS
        work = [a for a in result.actions if not isinstance(a, _REPORT)]
        lane_work = work if ordinary else [a for a in work if isinstance(a, LANE_STEPS[lane])]
        credentials = self._pass_credentials(key, observed, lane_work)
        executor = Executor(self.runtime, Pass(exporter_set, observed.klass, now, credentials))
        try:
            try:
                if ordinary:
                    executor.run(work)
                    executor.keep_current(result.keep_current, result.keep_token)
                    executor.run(a for a in result.actions if isinstance(a, _REPORT))
                else:
                    executor.run(a for a in work if isinstance(a, LANE_STEPS[lane]))
            finally:
                self.writes += executor.writes
                _log_pass(key, executor.done, result.waits if ordinary else ())
        except StepFailed as failed:
            self._report(key, observed.observation, failed, executor, now)
            raise
        return result

    def _report(
        self,
        key: ObjKey,
        observation: Observation,
        failed: StepFailed,
        executor: Executor,
        now: datetime,
    ) -> None:
        """Write the status and Events of the pass planned again with its failed step."""
        log.warning("%s/%s: %s failed: %s", *key, failed.failure.step, failed.failure.message)
        result = plan(replace(observation, failure=failed.failure), now)
        self.plans[key] = result
        executor.done.clear()
        try:
            executor.run(a for a in result.actions if isinstance(a, _REPORT))
        finally:
            self.writes += executor.writes
            _log_pass(key, executor.done, ())

    def _leftovers(self, key: ObjKey, exporter_set: Obj | None, now: datetime) -> None:
        """The lease protection of the instances labelled for the set that it does not
        control any more (`pool.rules.protection`): it was deleted (they are deleted with
        it, or orphaned), is being deleted, or was made again under the same name. Each is
        released once no lease holds it, or at the bound; while a deleted one is held an
        Event says once that it stays, and the set's key is requeued for the bound.
        Instances deleted while leased before they were protected get an Event each
        (`_lost`)."""
        namespace = key[0]
        with self._lost_lock:
            lost = self._lost.pop(key, [])
        live = None if exporter_set is None else _meta(exporter_set)
        owner = "" if live is None or live.get("deletionTimestamp") else live.get("uid", "")
        leftovers = [
            obj
            for obj in self.watches[EXPORTERS].by_index("set", key)
            if LEASE_PROTECTION in (_meta(obj).get("finalizers") or ())
            and (not owner or controller_of(obj) != owner)
        ]
        if not leftovers and not lost:
            return
        leased_by = leased_names(
            view for obj in leftovers for view in self._leases_naming(namespace, key_of(obj)[1])
        )
        for exporter, lease in lost:
            note = (
                f"Exporter {_meta(exporter).get('name')} was deleted while {lease} held it, "
                "before the pool protected it"
            )
            self._write_event(exporter, INSTANCE_LOST, "Delete", note, now, warning=True)
        soonest: datetime | None = None
        for obj in leftovers:
            view = exporter_view(obj)
            found = verdict(view, leased_by, busy_lease(view, leased_by), now)
            name, uid = view.name, view.uid
            if found.release:
                patch = without_protection(obj)
                try:
                    self.kube.patch(EXPORTERS, namespace, name, patch)
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise
                    continue  # gone, or changed: its event brings the set back
                self.writes += 1
                self._announced.discard(uid)
                note = f"released Exporter {name} of ExporterSet {key[1]}: {found.why}"
                log.info("%s/%s: %s", *key, note)
                self._write_event(obj, INSTANCE_RELEASED, "Release", note, now, found.warning)
            elif found.until is not None:  # deleted, held for its lease: say so once
                if uid not in self._announced:
                    self._announced.add(uid)
                    note = f"Exporter {name} of ExporterSet {key[1]} is being deleted: {found.why}"
                    log.info("%s/%s: %s", *key, note)
                    self._write_event(obj, INSTANCE_KEPT, "Keep", note, now, warning=False)
                if soonest is None or found.until < soonest:
                    soonest = found.until
        if soonest is not None:
            self.queue.add_after(key, max(0.0, (soonest - now).total_seconds()) + 0.5)

    def _write_event(
        self, regarding: Obj, reason: str, action: str, note: str, now: datetime, warning: bool
    ) -> None:
        """Best effort, as every Event: about an Exporter whose set may be gone."""
        event = build_event(
            {**regarding, "apiVersion": EXPORTERS.api_version, "kind": EXPORTERS.kind},
            reason=reason,
            action=action,
            note=note,
            now=now,
            warning=warning,
        )
        namespace = _meta(regarding).get("namespace", "")
        try:
            self.kube.create(EVENTS, namespace, event)
            self.writes += 1
        except NotLeading:
            raise
        except Exception as exc:  # an event must never fail a reconcile
            log.warning("%s: event %s not written: %s", namespace, reason, exc)

    # -- running -------------------------------------------------------------------------
    def snapshot(self) -> None:
        """Fill every cache with one list and no watch: the cluster as it is now, read
        only. A resource that is not served reads as empty, as in `run` (Jumpstarter's
        Lease CRD may be absent), except the ExporterSets themselves."""
        for informer in self.informers.values():
            try:
                informer.relist()
            except ApiError as exc:
                if exc.status != 404 or informer.resource == EXPORTERSETS:
                    raise

    def _worker(self) -> None:
        while (taken := self.queue.take()) is not None:
            key, lane = taken
            started = time.monotonic()
            try:
                # A key in a higher lane first gets a pass that only takes that lane's
                # steps (the replacements a Lease calls for; the Pods credentials allow),
                # then waits its turn for the rest (served marks, Secrets, status): with
                # many pools leased at once, refills and Pods do not queue behind the
                # writes that can wait, and Pods do not hold up refills.
                result = self.sync(key, Lane(lane))
                if lane != Lane.ORDINARY:
                    self.queue.add(key)
                self.queue.forget(key)
                outcome = "success"
                if result is not None and result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after.total_seconds() + 0.5)
                    outcome = "requeue_after"
            except Exception as exc:
                outcome = "error"
                delay = self.queue.add_rate_limited(key)
                log.warning("%s/%s: %s (retry in %.1fs)", *key, exc, delay)
            finally:
                self.queue.done(key)
            self.reconciles.record(outcome, time.monotonic() - started)

    def start_caches(self, stop: threading.Event) -> None:
        """Start every list-and-watch loop (once): a standby fills its caches too, so it
        is ready, and takes over from warm caches."""
        if self._caches_started:
            return
        self._caches_started = True
        for informer in self.informers.values():
            threading.Thread(
                target=informer.run, args=(stop,), daemon=True, name=informer.resource.plural
            ).start()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers.values())

    def stalled(self, bound: float) -> list[str]:
        """The resources whose list-and-watch loop has not heard from the apiserver for
        more than `bound` seconds (or has ended): what the liveness probe reports."""
        if not self._caches_started:
            return []
        return sorted(
            r.plural for r, informer in self.informers.items() if informer.stalled_for() > bound
        )

    def run(self, stop: threading.Event) -> None:
        """Fill the caches, then reconcile until `stop`; finishes the passes in flight."""
        self.start_caches(stop)
        for informer in self.informers.values():
            while not informer.synced.wait(0.2):
                if stop.is_set():
                    return
        for exporter_set in self.watches[EXPORTERSETS].items():
            # Leading from caches that may lag the last leader's creates: read live once.
            self.expectations.doubt(_key(exporter_set))
            self.queue.add(_key(exporter_set))
        self.events.start(stop)
        threads = [
            threading.Thread(target=self._worker, name=f"worker-{i}") for i in range(self.workers)
        ]
        for thread in threads:
            thread.start()
        log.info("reconciling (%s)", self.provisioner.name)
        stop.wait()
        self.queue.close()
        for thread in threads:
            thread.join()


def _claim_changed(old: Obj, new: Obj) -> bool:
    """What the claim rule reads of a set changed (its labels, selector, deletion)."""
    return pool_claim(old) != pool_claim(new) or bool(_meta(old).get("deletionTimestamp")) != bool(
        _meta(new).get("deletionTimestamp")
    )


def _canonical(selector: Mapping[str, Any]) -> str:
    """One text for equal selectors (a busy pool's Leases mostly share one)."""
    return json.dumps(selector, sort_keys=True, default=str)


def _pool_keys(exporter: Obj) -> set[ObjKey]:
    """The sets an Exporter concerns: its controller set, and the one its set label names
    (the same while the set controls it; after a deletion or an orphaning only the label
    is left, and its lease protection is still looked after: `Controller._leftovers`)."""
    keys = set(_owner_set(exporter))
    name = (_meta(exporter).get("labels") or {}).get(SET_LABEL)
    if name:
        keys.add((_meta(exporter).get("namespace", ""), name))
    return keys


def _issued(exporter: Obj) -> bool:
    """Jumpstarter's controller has issued the Exporter's credentials (in its status)."""
    status = exporter.get("status") or {}
    return bool(credential_secret_name(exporter) and status.get("endpoint"))


# The steps that report on a pass rather than change the pool: the status and Events. An
# ordinary pass writes them after its work, so a status never claims work that failed.
_REPORT = (PatchStatus, RecordEvent)


def _log_pass(key: ObjKey, done: Iterable[Action], waits: Iterable[Wait]) -> None:
    """The steps a pass carried out and what it held back, in the planner's words: a
    pass that acted at INFO (its status write at DEBUG), a quiet one at DEBUG."""
    done = list(done)
    level = logging.INFO if done else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    for step in steps(done) + held(waits):
        quiet = step.verb == UPDATE_STATUS
        log.log(logging.DEBUG if quiet else level, "%s/%s: %s", *key, step)


def _key(obj: Obj) -> ObjKey:
    meta = _meta(obj)
    return meta.get("namespace", ""), meta.get("name", "")
