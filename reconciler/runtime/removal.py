"""A pool's removals against the API, each guarded by what the plan saw.

- a fence is a merge patch conditioned on the resourceVersion the plan was made from,
  so an Exporter that changed since (for example got a `leaseRef`) is not fenced;
- a fence is the whole of its pass's part in a removal; the delete is a later pass's,
  once the fence has settled (`pool.rules.stages.settle`);
- before any delete or detach, the Leases are read live (not from the cache); if one
  holds the instance, the fence is lifted and nothing is deleted;
- deletes carry a uid precondition, so a newer object of the same name survives, and a
  Pod already being deleted is not deleted again;
- what the provisioner names of an instance's own objects (`Provisioner.cleanup`) is
  deleted before its Exporter, so a cleanup that fails leaves the fenced Exporter for
  the next pass to try again;
- an instance's lease protection (`pool.rules.protection`) is added and taken off with
  conditional patches, in the same write as the fence or the detach where there is one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from pool.model.access import EXPORTERS, JUMPSTARTER_LEASES, PODS
from pool.model.adapt import controller_of, lease_view, pod_exited
from pool.model.keys import (
    FENCED_AT,
    FENCED_FOR,
    LEASE_PROTECTION,
    NAME_LABEL,
    RETAINED_FROM,
    SERVED_LEASE,
    SET_LABEL,
)
from pool.model.reasons import FENCE_LIFTED, INSTANCE_RELEASED
from pool.model.timefmt import format_time
from pool.model.views import ProvisionedView
from reconciler.runtime.expectations import POD_DELETED
from reconciler.runtime.kube import ApiError
from reconciler.runtime.targets import TargetError
from reconciler.runtime.writer import Writer, because, finalizers, versioned, without_protection

__all__ = ["Removals"]

log = logging.getLogger("reconciler.executor")  # stable: log filters select by it

Obj = dict[str, Any]


class Removals(Writer):
    def _fence(self, name: str, fenced_for: str = "") -> bool:
        """Fence, conditional on the planned resourceVersion; False when the Exporter is
        gone or changed since the plan (the next pass plans again)."""
        exporter = self._cached_exporter(name)
        if exporter is None:
            return False
        # The lease protection goes with the fence (a Lease that took the instance first
        # gets it back at the next pass).
        protected = LEASE_PROTECTION in finalizers(exporter)
        patch = without_protection(exporter) if protected else versioned(exporter)
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
            and LEASE_PROTECTION in finalizers(exporter)
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
        note = because(f"kept Exporter {name}", why)
        self._event(FENCE_LIFTED, "Keep", note, self._cached_exporter(name))

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

    def _clean_up(self, name: str, provisioned: Sequence[ProvisionedView]) -> None:
        """Delete what the provisioner names of the instance's objects as the plan saw
        them (`Provisioner.cleanup`); one being deleted already, gone, or of a newer uid
        is left."""
        for ref in self.runtime.provisioner.cleanup(name, provisioned):
            if ref.deleting:
                continue
            if ref.target:
                self._clean_up_there(ref)
                continue
            try:
                self._write(
                    partial(self.kube.delete, ref.resource, self.namespace, ref.name, ref.uid)
                )
            except ApiError as exc:
                if exc.status != 409:  # the precondition: a newer object took the name
                    raise

    def _clean_up_there(self, view: ProvisionedView) -> None:
        """Delete one of the instance's objects on its target cluster."""
        targets = self.runtime.targets
        if targets is None:
            raise TargetError(f"{view.resource.kind} {view.namespace}/{view.name}: no target")
        self._write(partial(targets.delete, view))

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
        if LEASE_PROTECTION in finalizers(exporter):  # nothing of the pool looks after it now
            patch["metadata"]["finalizers"] = without_protection(exporter)["metadata"]["finalizers"]
        self._write(lambda: self.kube.patch(EXPORTERS, self.namespace, name, patch))

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
