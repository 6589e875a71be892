"""Carry out a plan's steps against the API, each one idempotent and guarded.

- Exporters are created with generateName (no name is ever reused) and noted in the
  runtime's expectations until the cache shows them, so a pass planned from a lagging
  cache makes no duplicate; a create without an answer has the set's Exporters read
  live before the next (`reconciler.runtime.expectations`); other creates treat "already
  exists" as success;
- a fence is a merge patch conditioned on the resourceVersion the plan was made from,
  so an Exporter that changed since (for example got a `leaseRef`) is not fenced;
- a fence is the whole of its pass's part in a removal; the delete is a later pass's,
  once the fence has settled (`pool.rules.stages.settle`);
- before any delete or detach, the Leases are read live (not from the cache); if one
  holds the instance, the fence is lifted and nothing is deleted;
- deletes carry a uid precondition, so a newer object of the same name survives, and a
  Pod already being deleted is not deleted again;
- each create accepted is noted in the runtime's expectations, so the passes that follow
  before the cache shows it do not repeat it;
- an instance's config Secret is rendered and compared with the cached one, and written
  only when it differs (a steady pool writes nothing; a rotated token is written at once);
- the Event of a created, removed or retained instance carries the planner's reason;
- an instance's lease protection (`pool.rules.protection`) is added and taken off with
  conditional patches, in the same write as the fence or the detach where there is one;
- a step that fails for good (`reconciler.runtime.failures`: rendering raised, a 4xx answer)
  raises `StepFailed`, saying which step on which instance; `done` lists the steps
  carried out before it.

An executor works with two values: `Runtime`, what the runtime holds for all passes (the
client, the provisioner, the caches it reads, expectations, the config Secret tracker,
the pools' memory), and `Pass`, what this pass is about (the set, its class, `now`, and
its instances' credentials as the pass observed them). It counts the API writes it
makes, which the benchmarks and tests read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pool.model.access import (
    EVENTS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    PODS,
    SECRETS,
)
from pool.model.actions import (
    Action,
    CreateExporter,
    CreatePod,
    DeletePod,
    LiftFence,
    MarkServed,
    PatchStatus,
    PromoteStandby,
    Protect,
    RecordEvent,
    RememberBackoff,
    RememberDemand,
    Remove,
    Retain,
    SetSurplusSince,
    Unprotect,
)
from pool.model.adapt import controller_of, lease_view, pod_exited
from pool.model.backoff import encode
from pool.model.demand import encode_demand
from pool.model.keys import (
    BACKOFF,
    BACKOFF_STEP,
    DEMAND,
    FENCED_AT,
    FENCED_FOR,
    LEASE_PROTECTION,
    LEGACY_SURPLUS_SINCE,
    NAME_LABEL,
    RETAINED_FROM,
    REVISION,
    SERVED_LEASE,
    SET_LABEL,
    STANDBY_LABEL,
    SURPLUS_SINCE,
)
from pool.model.reasons import (
    FENCE_LIFTED,
    INSTANCE_RELEASED,
    POD_CREATED,
    RETAINED,
    SCALE_UP,
    STANDBY_CREATED,
    STANDBY_PROMOTED,
)
from pool.model.timefmt import format_time
from pool.rendering.configsync import ConfigSync, same_secret, with_token
from pool.rendering.provisioners.base import Provisioner
from pool.rendering.render import (
    Credentials,
    InstanceContext,
    exporter_config,
    instance_context,
    render_exporter,
)
from pool.rules.explain import describe
from reconciler.runtime.cache import Cache
from reconciler.runtime.events import build_event
from reconciler.runtime.eventsender import EventSender
from reconciler.runtime.expectations import EXPORTER, POD, POD_DELETED, Expectations
from reconciler.runtime.failures import RenderError, StepFailed, classify
from reconciler.runtime.kube import ApiError, Kube, NotLeading
from reconciler.runtime.memory import MemoryLeases
from reconciler.runtime.named import NamedCache

__all__ = ["Executor", "Pass", "Runtime", "without_protection"]

log = logging.getLogger("reconciler.executor")  # stable: log filters select by it

Obj = dict[str, Any]


@dataclass(frozen=True)
class Runtime:
    """What a runtime holds for all its passes: the API client, the provisioner, the
    caches' readers, the writes the caches have not shown yet, each instance's last
    config rendering, and (in a namespaced install) the pools' memory Leases."""

    kube: Kube
    provisioner: Provisioner
    exporters: Cache  # the cached Exporters
    secrets: Cache  # the cached Secrets; told the answer of each config Secret write
    expectations: Expectations = field(default_factory=Expectations)
    configs: ConfigSync = field(default_factory=ConfigSync)
    # a namespaced install's pool memory (`reconciler.runtime.memory`); else the set's annotations
    memory: MemoryLeases | None = None
    # sends Events beside the passes once started (`reconciler.runtime.eventsender`); until
    # then, or without one, a pass writes its own
    events: EventSender | None = None


@dataclass(frozen=True)
class Pass:
    """What one pass is about: the set, its class, its `now`, and the credentials of its
    instances as the pass found them (by Exporter name: the credentials, or why there
    are none yet), worked out by the controller, not by the steps."""

    exporter_set: Obj
    klass: Obj | None
    now: datetime
    credentials: Mapping[str, Credentials | str] = field(default_factory=dict)


@dataclass
class Executor:
    runtime: Runtime
    this: Pass
    writes: int = 0
    done: list[Action] = field(default_factory=list)  # the steps carried out, in order

    @property
    def kube(self) -> Kube:
        return self.runtime.kube

    @property
    def namespace(self) -> str:
        return str(self.this.exporter_set["metadata"]["namespace"])

    def run(self, actions: Iterable[Action]) -> int:
        """Carry out the steps in order; StepFailed at the first that fails for good
        (anything else that goes wrong propagates as it is)."""
        for action in actions:
            try:
                carried_out = self.step(action)
            except NotLeading:
                raise
            except Exception as exc:
                verb, name, _ = describe(action)
                generated = action.name if isinstance(action, CreateExporter) else ""
                failure = classify(f"{verb} {name}", exc, generated)
                if failure is None:
                    raise
                raise StepFailed(failure) from exc
            if carried_out:
                self.done.append(action)
        return self.writes

    def step(self, action: Action) -> bool:
        """Carry out one step; False where a write conditional on what the plan saw found
        the object changed or gone (not done: the next pass plans again from what it finds,
        and only the pass that does it logs it)."""
        match action:
            case CreateExporter(prefix, why, step, revision, standby):
                self._create_exporter(prefix, why, step, revision, standby)
            case PromoteStandby(name, why, revision, step):
                self._promote(name, why, revision, step)
            case CreatePod(name):
                self._create_pod(name)
            case DeletePod(name, _, uid):
                self._delete_pod_if_stale(name, uid)
            case Remove(name, fence, why, planned_uid, pods, reason):
                if fence:  # the pass's whole part: the delete pass reads the Leases live
                    return self._fence(name, action.fenced_for)
                if not self._fence_and_check(name, False):
                    return False
                exporter = self._cached_exporter(name) or {}
                uid = planned_uid or str((exporter.get("metadata") or {}).get("uid", ""))
                self._write(lambda: self.kube.delete(EXPORTERS, self.namespace, name, uid))
                for pod_name, pod_uid in pods:  # the instance's own Pods, by uid
                    self._delete_pod_if_stale(pod_name, pod_uid, owner_gone=True)
                note = _because(f"removed Exporter {name}", why)
                self._event(reason, "Delete", note, exporter)
            case LiftFence(name, why):
                self._lift_fence(name, why)
            case Retain(name, why):
                if not self._fence_and_check(name, True):
                    return False
                self._detach(name)
                note = _because(f"detached Exporter {name} from the pool for debugging", why)
                self._event(RETAINED, "Retain", note, self._cached_exporter(name))
            case MarkServed(name, lease):
                served: Obj = {"metadata": {"annotations": {SERVED_LEASE: lease}}}
                self._write(lambda: self.kube.patch(EXPORTERS, self.namespace, name, served))
            case Protect(name, _, lease):
                return self._protect(name, lease)
            case Unprotect(name, why, warning):
                return self._unprotect(name, why, warning)
            case SetSurplusSince(since):
                value = format_time(since) if since is not None else None
                # Jumpstarter's key; the one earlier versions wrote goes with any write.
                self._remember({SURPLUS_SINCE: value, LEGACY_SURPLUS_SINCE: None})
            case RememberBackoff(backoff):
                self._remember({BACKOFF: encode(backoff) if backoff is not None else None})
            case RememberDemand(memory):
                self._remember({DEMAND: encode_demand(memory)})
            case PatchStatus(status):
                body: Obj = {"status": dict(status)}
                self._write(
                    lambda: self.kube.patch(
                        EXPORTERSETS, self.namespace, self._name, body, sub="status"
                    )
                )
                version = str(self.this.exporter_set["metadata"].get("resourceVersion", ""))
                self.runtime.expectations.wrote_status(self._key, version, status)
            case RecordEvent(reason, note, warning):
                if self.runtime.expectations.new_event(self._key, reason, note):
                    self._event(reason, "Wait", note, None, warning=warning)
        return True

    def _create_exporter(
        self, prefix: str, why: str, step: int, revision: str, standby: bool = False
    ) -> None:
        rendered = _rendered(render_exporter, self.this.exporter_set, prefix)
        annotations = rendered["metadata"].setdefault("annotations", {})
        if step:
            annotations[BACKOFF_STEP] = str(step)
        if revision:
            annotations[REVISION] = revision
        if standby:
            rendered["metadata"]["labels"][STANDBY_LABEL] = "true"
        created = self._create_generated(rendered)
        name = str(created["metadata"]["name"])
        self.runtime.expectations.expect(self._key, EXPORTER, name)
        if standby:
            note = _because(f"created standby Exporter {name} (no Pod)", why)
            self._event(STANDBY_CREATED, "Create", note, created)
        else:
            self._event(SCALE_UP, "Create", _because(f"created Exporter {name}", why), created)

    def _promote(self, name: str, why: str, revision: str, step: int) -> None:
        """The standby becomes an instance: its label goes (conditional on the planned
        resourceVersion); its Pod follows in the next pass, as for any new instance."""
        exporter = self._cached_exporter(name)
        if exporter is None:
            return
        patch = _version(exporter)
        patch["metadata"]["labels"] = {STANDBY_LABEL: None}
        patch["metadata"]["annotations"] = {REVISION: revision or None, BACKOFF_STEP: None}
        if step:
            patch["metadata"]["annotations"][BACKOFF_STEP] = str(step)
        if self._patch_if_unchanged(name, patch):
            note = _because(f"made standby Exporter {name} an instance", why)
            self._event(STANDBY_PROMOTED, "Promote", note, exporter)

    def _create_pod(self, name: str) -> None:
        """The instance's config Secret brought up to date, then its Pod."""
        exporter = self._cached_exporter(name) or self.kube.get(EXPORTERS, self.namespace, name)
        ctx = self._context(exporter) if exporter is not None else None
        if ctx is None:
            return
        self._sync_config(ctx)
        rendered = _rendered(self.runtime.provisioner.render_pod, ctx)
        pod, made = self._create_or_find(PODS, rendered)
        if pod is not None and controller_of(pod) == ctx.exporter_uid:
            self.runtime.expectations.expect(self._key, POD, ctx.exporter_uid)
        if made:
            self._event(POD_CREATED, "Create", f"created Pod {name}", pod)

    def _protect(self, name: str, lease: str) -> bool:
        exporter = self._cached_exporter(name)
        if exporter is None:
            return False
        meta = exporter.get("metadata") or {}
        change: Obj = {
            "resourceVersion": meta.get("resourceVersion"),
            "finalizers": [*(meta.get("finalizers") or []), LEASE_PROTECTION],
        }
        if lease:
            change["annotations"] = {SERVED_LEASE: lease}
        return self._patch_if_unchanged(name, {"metadata": change})

    def _unprotect(self, name: str, why: str, warning: bool) -> bool:
        exporter = self._cached_exporter(name)
        released = exporter is not None and self._patch_if_unchanged(
            name, without_protection(exporter)
        )
        deleted = exporter is not None and (exporter.get("metadata") or {}).get("deletionTimestamp")
        if released and (warning or deleted):  # it goes now: say why
            note = f"released Exporter {name}: {why}"
            self._event(INSTANCE_RELEASED, "Release", note, exporter, warning=warning)
        return released

    def keep_current(self, names: Iterable[str], token_only: Iterable[str] = ()) -> int:
        """Bring the config Secrets of running instances up to date, and only the token
        in those of `token_only` (outdated: their process keeps the configuration it
        started with); writes made. StepFailed (step "update config <name>") at the
        first that fails for good."""
        before = self.writes
        syncs = [(n, self._sync_config) for n in names]
        syncs += [(n, self._sync_token) for n in token_only]
        for name, sync in syncs:
            exporter = self._cached_exporter(name)
            try:
                ctx = self._context(exporter) if exporter is not None else None
                if ctx is not None:
                    sync(ctx)
            except NotLeading:
                raise
            except Exception as exc:
                failure = classify(f"update config {name}", exc)
                if failure is None:
                    raise
                raise StepFailed(failure) from exc
        return self.writes - before

    # -- helpers -----------------------------------------------------------------------
    def _cached_exporter(self, name: str) -> Obj | None:
        return self.runtime.exporters.get(self.namespace, name)

    def _cached_secret(self, name: str) -> Obj | None:
        return self.runtime.secrets.get(self.namespace, name)

    def _stale_secret(self, name: str) -> None:
        """A write found the cached copy of this Secret out of date: read it again soon
        (Secrets read by name; a watch catches up by itself)."""
        secrets = self.runtime.secrets
        if isinstance(secrets, NamedCache):
            secrets.urge(self.namespace, name)

    @property
    def _name(self) -> str:
        return str(self.this.exporter_set["metadata"]["name"])

    @property
    def _key(self) -> tuple[str, str]:
        return self.namespace, self._name

    @property
    def _set_uid(self) -> str:
        return str(self.this.exporter_set["metadata"].get("uid", ""))

    def _remember(self, marks: Mapping[str, str | None]) -> None:
        """Write the pool's memory: into its Lease, else into the set's annotations."""
        memory = self.runtime.memory
        if memory is not None:
            self._write(lambda: memory.remember(self.this.exporter_set, marks))
            return
        patch: Obj = {"metadata": {"annotations": dict(marks)}}
        self._write(lambda: self.kube.patch(EXPORTERSETS, self.namespace, self._name, patch))

    def _write(self, call: Callable[[], Any]) -> Any:
        self.writes += 1
        return call()

    def _event(
        self, reason: str, action: str, note: str, related: Obj | None, warning: bool = False
    ) -> None:
        """Best effort: a pool's step is done whether or not its Event could be written."""
        event = build_event(
            self.this.exporter_set,
            reason=reason,
            action=action,
            note=note,
            now=self.this.now,
            related=related or None,
            warning=warning,
        )
        events = self.runtime.events
        if events is not None and events.running:
            self.writes += 1
            events.send(self.namespace, event)
            return
        try:
            self._write(lambda: self.kube.create(EVENTS, self.namespace, event))
        except Exception as exc:  # an event must never fail a reconcile
            log.warning("%s/%s: event %s not written: %s", self.namespace, self._name, reason, exc)

    def _create_generated(self, body: Obj) -> Obj:
        """Create an Exporter whose name the apiserver generates. When no answer says
        whether it was made (the connection lost, a 5xx), the set is marked doubtful: its
        next pass reads its Exporters live before it creates again."""
        try:
            created: Obj = self._write(lambda: self.kube.create(EXPORTERS, self.namespace, body))
        except NotLeading:
            raise  # refused before it was sent
        except ApiError as exc:
            if exc.status >= 500:
                self.runtime.expectations.doubt(self._key)
            raise
        except Exception:
            self.runtime.expectations.doubt(self._key)
            raise
        return created

    def _create_or_find(self, resource: Any, body: Obj) -> tuple[Obj | None, bool]:
        """Create, or find the existing object of that name ("already exists"); and
        whether this call made it."""
        try:
            result: Obj = self._write(lambda: self.kube.create(resource, self.namespace, body))
            return result, True
        except ApiError as exc:
            if exc.status != 409:
                raise
            name = body["metadata"]["name"]
            found = self.kube.get(resource, self.namespace, name)
            meta = (found or {}).get("metadata") or {}
            log.debug(
                "%s/%s: create %s %s: already exists (uid %s, owner %s, deleting %s)",
                self.namespace,
                self._name,
                resource.kind,
                name,
                meta.get("uid"),
                controller_of(found or {}) or "none",
                bool(meta.get("deletionTimestamp")),
            )
            if found is not None and not meta.get("deletionTimestamp"):
                found = self._adopt_labels(resource, found, body)
            return found, False

    def _adopt_labels(self, resource: Any, found: Obj, body: Obj) -> Obj:
        """An object of the same controller that lacks labels the rendered one carries
        (made by an earlier version of this product, whose instance Pods carried only
        SET_LABEL): add them, so the caches that select by NAME_LABEL see it. Without
        that, the pool never saw the Pod and asked for it again at every pass."""
        if not controller_of(found) or controller_of(found) != controller_of(body):
            return found
        have = (found.get("metadata") or {}).get("labels") or {}
        wanted = (body.get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in wanted.items() if k not in have}
        if not missing:
            return found
        name = body["metadata"]["name"]
        patch: Obj = {"metadata": {"labels": missing}}
        patched: Obj = self._write(lambda: self.kube.patch(resource, self.namespace, name, patch))
        log.info(
            "%s/%s: %s %s: added the labels %s it lacked",
            self.namespace, self._name, resource.kind, name, ", ".join(sorted(missing)),
        )  # fmt: skip
        return patched

    def _context(self, exporter: Obj) -> InstanceContext | None:
        """The instance's rendering inputs, or None while it cannot be rendered."""
        klass = self.this.klass
        name = str((exporter.get("metadata") or {}).get("name", ""))
        credentials = self.this.credentials.get(name)
        if klass is None or not isinstance(credentials, Credentials):
            return None  # planned from a cache that has moved on; the next pass says why
        context: InstanceContext = _rendered(
            instance_context,
            self.this.exporter_set,
            klass,
            exporter,
            self.runtime.provisioner.default_images,
            credentials,
        )
        return context

    def _sync_config(self, ctx: InstanceContext) -> None:
        """Write the config Secret only when the cached one differs from the rendered one."""
        current = self._cached_secret(ctx.config_secret)

        def render() -> Obj | None:
            config = exporter_config(ctx, self.runtime.provisioner.drivers(ctx))
            return self.runtime.configs.wanted(ctx, config, current)

        wanted = _rendered(render)
        if wanted is None:
            return
        if current is None:
            try:
                self.runtime.secrets.observed_write(
                    self._write(lambda: self.kube.create(SECRETS, self.namespace, wanted))
                )
                return
            except ApiError as exc:
                if exc.status != 409:
                    raise
            current = self.kube.get(SECRETS, self.namespace, ctx.config_secret)
            if current is None or same_secret(current, wanted):
                if current is not None:
                    self.runtime.secrets.observed_write(current)
                return
        version = (current.get("metadata") or {}).get("resourceVersion")
        body = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
        try:
            answer = self._write(
                lambda: self.kube.update(SECRETS, self.namespace, ctx.config_secret, body)
            )
        except ApiError as exc:
            if exc.status in (404, 409):  # changed or deleted since the cache read it
                self._stale_secret(ctx.config_secret)
            raise
        self.runtime.secrets.observed_write(answer)

    def _sync_token(self, ctx: InstanceContext) -> None:
        """An outdated instance's Secret: a rotated token written into what it holds."""
        configs = self.runtime.configs
        if not configs.token_unknown(ctx):
            return
        current = self.kube.get(SECRETS, self.namespace, ctx.config_secret)
        if current is None:
            return  # its Pod cannot run without it: a new Pod brings the new one
        wanted = with_token(ctx, current)
        if wanted is not None:
            version = (current.get("metadata") or {}).get("resourceVersion")
            body = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
            answer = self._write(
                lambda: self.kube.update(SECRETS, self.namespace, ctx.config_secret, body)
            )
            self.runtime.secrets.observed_write(answer)
        configs.token_kept(ctx)

    def _delete_pod_if_stale(self, name: str, uid: str, owner_gone: bool = False) -> None:
        """Delete the Pod `uid` if it still is what the plan saw: finished, or its
        Exporter gone (or replaced by a newer one of that name); never one already being
        deleted, never a newer Pod of that name (the uid precondition)."""
        pod = self.kube.get(PODS, self.namespace, name)
        meta = (pod or {}).get("metadata") or {}
        if pod is None or meta.get("deletionTimestamp") or (uid and meta.get("uid") != uid):
            return
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        owner_uid = controller_of(pod)
        if not (finished or owner_gone):
            exporter = self.kube.get(EXPORTERS, self.namespace, name)
            owner_gone = exporter is None or (exporter.get("metadata") or {}).get("uid") != (
                owner_uid
            )
        if finished or owner_gone or pod_exited(pod):
            live_uid = str(meta.get("uid", ""))
            try:
                self._write(lambda: self.kube.delete(PODS, self.namespace, name, live_uid))
            except ApiError as exc:
                if exc.status != 409:  # the precondition: a newer Pod took the name
                    raise
                return
            self.runtime.expectations.expect(self._key, POD_DELETED, live_uid)

    def _held_by_lease(self, name: str) -> bool:
        try:
            leases, _ = self.kube.list(JUMPSTARTER_LEASES, self.namespace)
        except ApiError as exc:
            # A resource that is not served (Jumpstarter's Lease CRD not installed yet)
            # has no objects: no Lease holds the instance, as the caches say too. A list
            # answers 404 for nothing else (an unknown namespace lists empty).
            if exc.status != 404:
                raise
            leases = []
        if any(v.exporter == name and not v.ended for v in map(lease_view, leases)):
            return True
        live = self.kube.get(EXPORTERS, self.namespace, name)
        return bool(live and ((live.get("status") or {}).get("leaseRef") or {}).get("name"))

    def _fence(self, name: str, fenced_for: str = "") -> bool:
        """Fence, conditional on the planned resourceVersion; False when the Exporter is
        gone or changed since the plan (the next pass plans again)."""
        exporter = self._cached_exporter(name)
        if exporter is None:
            return False
        # The lease protection goes with the fence (a Lease that took the instance first
        # gets it back at the next pass).
        protected = LEASE_PROTECTION in _finalizers(exporter)
        patch = without_protection(exporter) if protected else _version(exporter)
        fenced = {FENCED_AT: format_time(self.this.now), FENCED_FOR: fenced_for or None}
        patch["metadata"]["annotations"] = fenced
        patch["spec"] = {"enabled": False}
        return self._patch_if_unchanged(name, patch)

    def _fence_and_check(self, name: str, fence: bool) -> bool:
        """Fence (unless fenced already), then True only if no Lease holds the instance."""
        exporter = self._cached_exporter(name)
        if exporter is None:
            return False
        if fence and not self._fence(name):
            return False
        if (
            not fence
            and LEASE_PROTECTION in _finalizers(exporter)
            and not self._patch_if_unchanged(name, without_protection(exporter))
        ):
            return False
        if self._held_by_lease(name):
            self._lift_fence(name, "a Lease took it first")
            return False
        return True

    def _lift_fence(self, name: str, why: str) -> None:
        log.info("%s/%s: %s; keeping it", self.namespace, name, why)
        lifted = {FENCED_AT: None, FENCED_FOR: None}
        unfence = {"metadata": {"annotations": lifted}, "spec": {"enabled": True}}
        self._write(lambda: self.kube.patch(EXPORTERS, self.namespace, name, unfence))
        note = _because(f"kept Exporter {name}", why)
        self._event(FENCE_LIFTED, "Keep", note, self._cached_exporter(name))

    def _detach(self, name: str) -> None:
        """reclaimPolicy Retain: the Pod first, then the Exporter, leave the set."""
        relabel: Mapping[str, Any] = {
            "metadata": {
                "labels": {SET_LABEL: None},
                "annotations": {RETAINED_FROM: self._name},
            }
        }
        pod_relabel = {
            "metadata": {"labels": {NAME_LABEL: None}, "annotations": {RETAINED_FROM: self._name}}
        }
        try:
            self._write(lambda: self.kube.patch(PODS, self.namespace, name, pod_relabel))
        except ApiError as exc:
            if exc.status != 404:
                raise
        exporter = self.kube.get(EXPORTERS, self.namespace, name) or {}
        refs = [
            r
            for r in (exporter.get("metadata") or {}).get("ownerReferences") or []
            if r.get("uid") != self._set_uid
        ]
        patch = {**relabel, "metadata": {**relabel["metadata"], "ownerReferences": refs}}
        if LEASE_PROTECTION in _finalizers(exporter):  # nothing of the pool looks after it now
            patch["metadata"]["finalizers"] = without_protection(exporter)["metadata"]["finalizers"]
        self._write(lambda: self.kube.patch(EXPORTERS, self.namespace, name, patch))

    def _patch_if_unchanged(self, name: str, patch: Obj) -> bool:
        """A patch conditional on the resourceVersion it carries; False when the Exporter
        is gone or changed since the plan (the next pass plans again)."""
        try:
            self._write(lambda: self.kube.patch(EXPORTERS, self.namespace, name, patch))
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True


def _finalizers(obj: Obj) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _version(obj: Obj) -> Obj:
    """The start of a merge patch conditional on the resourceVersion `obj` was seen at."""
    return {"metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}}


def without_protection(exporter: Obj) -> Obj:
    """A merge patch taking LEASE_PROTECTION off the Exporter, conditional on the
    resourceVersion it was seen at (a merge patch replaces the whole list)."""
    patch = _version(exporter)
    patch["metadata"]["finalizers"] = [f for f in _finalizers(exporter) if f != LEASE_PROTECTION]
    return patch


def _rendered(render: Callable[..., Any], *args: Any) -> Any:
    """Whatever rendering raises becomes RenderError (a failure the status reports)."""
    try:
        return render(*args)
    except NotLeading:
        raise
    except Exception as exc:
        raise RenderError(str(exc)) from exc


def _because(done: str, why: str) -> str:
    return f"{done}: {why}" if why else done
