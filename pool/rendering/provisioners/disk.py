"""The guest's disk in an instance Pod, as Jumpstarter main's exporter-set controller
renders it (`controller/internal/exporterset/disk`, its change #928): the volume `disk`,
mounted at `/disk` in the containers that reach the guest's disk.

- No StorageClass: an emptyDir whose `sizeLimit` is the volume's size, and the container
  that runs QEMU requests and is limited to that much `ephemeral-storage`, so the
  scheduler counts it (where the class's `scheduling.resources` name neither; each is
  kept as given).
- A StorageClass: a generic ephemeral volume, its claim (`<pod>-disk`, made and owned by
  the Pod, gone with it) asking that class, the access modes and the volume's size; the
  Pod's `fsGroup` is the exporter's user, so `jmp run` can write the claim.

The sizes come from `api.provisioners.qemu_storage.guest_disk`. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from api.provisioners.qemu_storage import GuestDisk
from pool.model.jumpstarter import EXPORTER_UID

__all__ = ["DISK_DIR", "DISK_VOLUME", "disk_mount", "disk_security", "disk_volume", "sized"]

DISK_VOLUME = "disk"
DISK_DIR = "/disk"
_EPHEMERAL = "ephemeral-storage"


def disk_mount() -> dict[str, Any]:
    return {"name": DISK_VOLUME, "mountPath": DISK_DIR}


def disk_volume(disk: GuestDisk) -> dict[str, Any]:
    if not disk.storage_class:
        return {"name": DISK_VOLUME, "emptyDir": {"sizeLimit": disk.volume}}
    claim = {
        "accessModes": list(disk.access_modes),
        "storageClassName": disk.storage_class,
        "resources": {"requests": {"storage": disk.volume}},
    }
    return {"name": DISK_VOLUME, "ephemeral": {"volumeClaimTemplate": {"spec": claim}}}


def disk_security(disk: GuestDisk) -> dict[str, Any]:
    """The Pod's securityContext the disk needs: the claim's files the exporter's group's."""
    return {"fsGroup": EXPORTER_UID} if disk.storage_class else {}


def sized(resources: Mapping[str, Any] | None, disk: GuestDisk) -> dict[str, Any]:
    """The resources of the container that runs QEMU: `resources` with the emptyDir's
    `ephemeral-storage` as request and limit where they name none (a copy)."""
    result = copy.deepcopy(dict(resources or {}))
    if disk.storage_class:
        return result
    for kind in ("requests", "limits"):
        named = dict(result.get(kind) or {})
        named.setdefault(_EPHEMERAL, disk.volume)
        result[kind] = named
    return result
