"""The finalizer that holds a deleted ExporterSet until its instances' objects on the
target cluster are cleaned up (`Provisioner.remote`), as Jumpstarter's pull request #927
keeps it (`exporterset.jumpstarter.dev/remote-cleanup`, reconciler.go:73, 244-281): so
that a set deleted while no reconciler runs still has its VirtualMachines removed, and a
set #927 made (with its finalizer) is not stuck once this reconciler serves it.

Added to each set of this provisioner where the install may patch sets (cluster-wide;
the Role of Jumpstarter's operator that a namespaced install keeps to grants no write
of a set, so there the sweep of `reconciler.runtime.targets` alone does it). On the
set's deletion, the objects there of its instances that no lease holds are deleted,
then the finalizer goes. Unlike #927, which deletes every instance's VM, a leased
instance keeps its VM: its Exporter stays under lease protection until the lease ends,
and the sweep removes the VM once the Exporter is gone.
"""

from __future__ import annotations

from typing import Any

from api.access import CLUSTER
from pool.model.access import EXPORTERSETS, allowed
from pool.model.keys import LEASE_PROTECTION
from pool.rendering.provisioners.base import target_of
from reconciler.runtime.cache import Cache, meta_of
from reconciler.runtime.kube import ApiError, Kube
from reconciler.runtime.targets import Targets

__all__ = ["FINALIZER", "RemoteCleanup"]

FINALIZER = "exporterset.jumpstarter.dev/remote-cleanup"  # #927's reconciler.go:73

Obj = dict[str, Any]


class RemoteCleanup:
    def __init__(
        self, kube: Kube, provisioner: str, targets: Targets, exporters: Cache, mode: str = CLUSTER
    ) -> None:
        self.kube, self.provisioner, self.targets, self.exporters = (
            kube, provisioner, targets, exporters
        )  # fmt: skip
        self.may_patch = allowed(EXPORTERSETS, "patch", mode=mode)

    def look_after(self, exporter_set: Obj, klass: Obj | None) -> int:
        """The set's finalizer added (its class names this provisioner), or (the set
        being deleted) its unleased instances' objects there deleted and the finalizer
        taken off; the writes made."""
        meta = meta_of(exporter_set)
        held = list(meta.get("finalizers") or [])
        if not self.may_patch or (meta.get("deletionTimestamp") is None) == (FINALIZER in held):
            return 0
        if meta.get("deletionTimestamp") is None:
            ours = ((klass or {}).get("spec") or {}).get("provisioner") == self.provisioner
            return self._finalizers(exporter_set, [*held, FINALIZER]) if ours else 0
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        ref = target_of(self.targets.remote, exporter_set, klass)
        if ref is not None:
            _, synced = self.targets.observe(key, ref)
            if not synced:
                return 0  # its cache's first list wakes the set again
        gone = self.targets.sweep(key, self.exporters, keep=self._leased(key[0]))
        return gone + self._finalizers(exporter_set, [f for f in held if f != FINALIZER])

    def _leased(self, namespace: str) -> Any:
        def leased(instance: str) -> bool:
            exporter = self.exporters.get(namespace, instance) or {}
            status = exporter.get("status") or {}
            return LEASE_PROTECTION in (meta_of(exporter).get("finalizers") or []) or bool(
                (status.get("leaseRef") or {}).get("name")
            )

        return leased

    def _finalizers(self, exporter_set: Obj, finalizers: list[str]) -> int:
        """A merge patch of the set's finalizers, conditional on the version seen."""
        meta = meta_of(exporter_set)
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": finalizers}
        }
        try:
            self.kube.patch(EXPORTERSETS, meta["namespace"], meta["name"], patch)
        except ApiError as exc:
            if exc.status not in (404, 409):  # gone, or changed: the next pass sees it
                raise
        return 1
