"""Provisioner plug-ins, by the name a VirtualTargetClass gives in `provisioner`.

Adding a backend means adding a module with a `Provisioner` and one line here
(docs/development.md, "Adding a provisioner"). A class naming a provisioner not listed
is its own controller's: admission checks nothing of its parameters, and this product
renders none of its instances.
"""

from __future__ import annotations

from typing import Any

from api.access import Permission
from api.provisioners.qemu import Layout
from pool.model.access import ACCESS, provisioned_access
from pool.rendering.provisioners.base import Provisioner
from pool.rendering.provisioners.kubevirt import KubevirtProvisioner
from pool.rendering.provisioners.qemu import QemuProvisioner

__all__ = [
    "ADMISSION_ONLY",
    "PROVISIONERS",
    "RECONCILER_ACCESS",
    "Provisioner",
    "known",
    "provisioner",
]

PROVISIONERS: dict[str, Provisioner] = {
    p.name: p for p in (QemuProvisioner(), KubevirtProvisioner())
}
# Provisioners admission checks but the reconcile loop cannot run yet, and why (none
# today: KubeVirt's target cluster is `reconciler.runtime.targets`').
ADMISSION_ONLY: dict[str, str] = {}

# What the deploy RBAC grants the reconciler of each provisioner: the table
# (`pool.model.access.ACCESS`) and the calls on that provisioner's own resources (none for
# QEMU or KubeVirt), as a running reconciler's client allows (`reconciler.runtime.kube`).
RECONCILER_ACCESS: dict[str, tuple[Permission, ...]] = {
    name: (*ACCESS, *provisioned_access(p.watches)) for name, p in PROVISIONERS.items()
}


def known(name: Any) -> Provisioner | None:
    """The plug-in a class's `provisioner` names, None for one this product does not know."""
    return PROVISIONERS.get(name) if isinstance(name, str) else None


def provisioner(name: str, *, qemu_layout: str | None = None) -> Provisioner:
    """The plug-in the reconcile loop runs for `name`; KeyError with the known names
    otherwise, or why it cannot run one admission knows (`ADMISSION_ONLY`). `qemu_layout`
    is the QEMU provisioner's default layout where a pool names none (`exporter` unless
    given; ValueError for another value)."""
    if name in ADMISSION_ONLY:
        raise KeyError(f"provisioner {name!r} is checked by admission only: {ADMISSION_ONLY[name]}")
    try:
        found = PROVISIONERS[name]
    except KeyError:
        known = ", ".join(sorted(set(PROVISIONERS) - set(ADMISSION_ONLY)))
        raise KeyError(f"unknown provisioner {name!r} (known: {known})") from None
    if qemu_layout is not None and isinstance(found, QemuProvisioner):
        return QemuProvisioner(Layout(qemu_layout))
    return found
