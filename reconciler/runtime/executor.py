"""Carry out a plan's steps against the API, each one idempotent and guarded.

- Exporters are created with generateName (no name is ever reused) and noted in the
  runtime's expectations until the cache shows them, so a pass planned from a lagging
  cache makes no duplicate; a create without an answer has the set's Exporters read
  live before the next (`reconciler.runtime.expectations`); other creates treat "already
  exists" as success;
- each create accepted is noted in the runtime's expectations, so the passes that follow
  before the cache shows it do not repeat it;
- removals, fences and lease protection: `reconciler.runtime.removal`; the instances'
  config Secrets: `reconciler.runtime.configwrites`;
- the Event of a created, removed or retained instance carries the planner's reason;
- a step that fails for good (`reconciler.runtime.failures`: rendering raised, a 4xx answer)
  raises `StepFailed`, saying which step on which instance; `done` lists the steps
  carried out before it.

An executor works with two values (`reconciler.runtime.writer`): `Runtime`, what the
runtime holds for all passes, and `Pass`, what this pass is about. It counts the API
writes it makes, which the benchmarks and tests read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pool.model.access import EXPORTERS, EXPORTERSETS, PODS
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
from pool.model.adapt import controller_of
from pool.model.backoff import encode
from pool.model.demand import encode_demand
from pool.model.keys import (
    BACKOFF,
    BACKOFF_STEP,
    DEMAND,
    LEGACY_SURPLUS_SINCE,
    REVISION,
    SERVED_LEASE,
    STANDBY_LABEL,
    SURPLUS_SINCE,
)
from pool.model.reasons import POD_CREATED, RETAINED, SCALE_UP, STANDBY_CREATED, STANDBY_PROMOTED
from pool.model.timefmt import format_time
from pool.rendering.provisioners.base import target_of
from pool.rendering.render import InstanceContext, render_exporter
from pool.rules.explain import describe
from reconciler.runtime.configwrites import ConfigWrites
from reconciler.runtime.expectations import EXPORTER, POD
from reconciler.runtime.failures import StepFailed, classify
from reconciler.runtime.kube import ApiError, NotLeading
from reconciler.runtime.removal import Removals
from reconciler.runtime.targets import TargetError
from reconciler.runtime.writer import (
    Pass,
    Runtime,
    because,
    render_or_fail,
    versioned,
    without_protection,
)

__all__ = ["Executor", "Pass", "Runtime", "without_protection"]

log = logging.getLogger("reconciler.executor")  # stable: log filters select by it

Obj = dict[str, Any]


@dataclass
class Executor(Removals, ConfigWrites):
    done: list[Action] = field(default_factory=list)  # the steps carried out, in order

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
            case Remove(name, fence, why, planned_uid, pods, reason, provisioned):
                if fence:  # the pass's whole part: the delete pass reads the Leases live
                    return self._fence(name, action.fenced_for)
                if not self._fence_and_check(name, False):
                    return False
                exporter = self._cached_exporter(name) or {}
                uid = planned_uid or str((exporter.get("metadata") or {}).get("uid", ""))
                self._clean_up(name, provisioned)  # first: a failure keeps the Exporter
                self._write(lambda: self.kube.delete(EXPORTERS, self.namespace, name, uid))
                for pod_name, pod_uid in pods:  # the instance's own Pods, by uid
                    self._delete_pod_if_stale(pod_name, pod_uid, owner_gone=True)
                note = because(f"removed Exporter {name}", why)
                self._event(reason, "Delete", note, exporter)
            case LiftFence(name, why):
                self._lift_fence(name, why)
            case Retain(name, why):
                if not self._fence_and_check(name, True):
                    return False
                self._detach(name)
                note = because(f"detached Exporter {name} from the pool for debugging", why)
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
        rendered = render_or_fail(render_exporter, self.this.exporter_set, prefix)
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
            note = because(f"created standby Exporter {name} (no Pod)", why)
            self._event(STANDBY_CREATED, "Create", note, created)
        else:
            self._event(SCALE_UP, "Create", because(f"created Exporter {name}", why), created)

    def _promote(self, name: str, why: str, revision: str, step: int) -> None:
        """The standby becomes an instance: its label goes (conditional on the planned
        resourceVersion); its Pod follows in the next pass, as for any new instance."""
        exporter = self._cached_exporter(name)
        if exporter is None:
            return
        patch = versioned(exporter)
        patch["metadata"]["labels"] = {STANDBY_LABEL: None}
        patch["metadata"]["annotations"] = {REVISION: revision or None, BACKOFF_STEP: None}
        if step:
            patch["metadata"]["annotations"][BACKOFF_STEP] = str(step)
        if self._patch_if_unchanged(name, patch):
            note = because(f"made standby Exporter {name} an instance", why)
            self._event(STANDBY_PROMOTED, "Promote", note, exporter)

    def _create_pod(self, name: str) -> None:
        """The instance's objects on its target cluster where it has one, its config
        Secret brought up to date, then its Pod."""
        exporter = self._cached_exporter(name) or self.kube.get(EXPORTERS, self.namespace, name)
        ctx = self._context(exporter) if exporter is not None else None
        if exporter is None or ctx is None:
            return
        if self.runtime.targets is not None:
            self._create_there(ctx)
            ctx = self._context(exporter)  # with where the Services made there are reached
            if ctx is None:
                return
        self._sync_config(ctx)
        rendered = render_or_fail(self.runtime.provisioner.render_pod, ctx)
        pod, made = self._create_or_find(PODS, rendered)
        if pod is not None and controller_of(pod) == ctx.exporter_uid:
            self.runtime.expectations.expect(self._key, POD, ctx.exporter_uid)
        if made:
            self._event(POD_CREATED, "Create", f"created Pod {name}", pod)

    def _create_there(self, ctx: InstanceContext) -> None:
        """What the exporter drives, made before it starts (`reconciler.runtime.targets`)."""
        targets = self.runtime.targets
        assert targets is not None
        ref = target_of(targets.remote, self.this.exporter_set, self.this.klass)
        if ref is None:
            raise TargetError("the class names no credentials Secret or no namespace")
        targets.ensure(ctx, ref)

    def _remember(self, marks: Mapping[str, str | None]) -> None:
        """Write the pool's memory: into its Lease, else into the set's annotations."""
        memory = self.runtime.memory
        if memory is not None:
            self._write(lambda: memory.remember(self.this.exporter_set, marks))
            return
        patch: Obj = {"metadata": {"annotations": dict(marks)}}
        self._write(lambda: self.kube.patch(EXPORTERSETS, self.namespace, self._name, patch))

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
