"""Parameters of the `qemu.jumpstarter.dev` provisioner, as Jumpstarter documents them.

The keys are Jumpstarter's (its design for scalable virtual exporters, JEP-0014, and its
own exporter-set controller), so a class or set written for Jumpstarter is admitted here
unchanged. All optional:

- `arch`: `x86_64` or `aarch64`; the guest architecture (`qemu-system-<arch>`).
- `machineType`: the QEMU machine type (`q35`, `virt`, ...).
- `firmware.url`: URL or OCI reference of a firmware or boot image;
  `firmware.digest`: `sha256:` and 64 hex digits. `firmware.type`: `bios` or `uefi`,
  what boots an x86_64 guest (this project's key, not Jumpstarter's; aarch64 boots only
  UEFI; the default and the firmware's paths: `api.provisioners.qemu_firmware`).
- `resources.cpu`: virtual CPUs, an integer 1-64; `resources.memory`: guest RAM,
  128Mi-256Gi. Sizes are Kubernetes quantities and must be whole KiB, so that QEMU's own
  size spelling can say them exactly. `resources.storage` (1Gi-2Ti) is where the guest's
  disk was before Jumpstarter moved it to `storage`; it still sizes the disk where
  `storage.size` is unset, with a warning.
- `storage`: the guest's disk, its size and where it lives (`api.provisioners.qemu_storage`).
- `layout`: where QEMU runs in an instance Pod (`Layout`); this project's key, not
  Jumpstarter's: `exporter` (in the exporter's own container, as release 0.9.0's QEMU
  driver runs it) or `sidecar` (in a runtime sidecar reached through the driver's
  `launcher_socket`, as Jumpstarter main renders it). Unset, the reconciler's entry point
  chooses (`pool.rendering.provisioners.qemu`).

Jumpstarter's provisioner passes keys it does not know through, so an unknown key is not
an error here either: `api.provisioners.check` reports it as a warning (the models allow
extra keys for that reason). No I/O.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator

from api.jumpstarter import JUMPSTARTER_RELEASE, JUMPSTARTER_REPOSITORIES
from api.provisioners.fields import MEMORY_RANGE, OPEN, STORAGE_RANGE, bytes_within, qemu_size
from api.provisioners.qemu_storage import QemuStorage

__all__ = [
    "DEFAULT_IMAGES",
    "PROVISIONER",
    "QEMU_EXPORTER_IMAGE",
    "Architecture",
    "FirmwareType",
    "Layout",
    "QemuFirmware",
    "QemuParameters",
    "QemuResources",
    "qemu_size",
]

PROVISIONER = "qemu.jumpstarter.dev"
# The images an instance runs unless its class or set names others (docs/design.md §7), by role.
DEFAULT_IMAGES = {
    "exporter": f"{JUMPSTARTER_REPOSITORIES}jumpstarter:{JUMPSTARTER_RELEASE}",
    "runtime": f"{JUMPSTARTER_REPOSITORIES}virtual/qemu-runtime:{JUMPSTARTER_RELEASE}",
}

# The exporter image this project ships for the `exporter` layout (images/qemu-exporter):
# Jumpstarter's release with `jmp run`, its QEMU driver, and QEMU with SeaBIOS.
# Jumpstarter's published exporter image carries no QEMU.
QEMU_EXPORTER_IMAGE = f"ghcr.io/jumpstarter-dev/virtualtarget-qemu-exporter:{JUMPSTARTER_RELEASE}"


class Architecture(str, Enum):
    X86_64 = "x86_64"
    AARCH64 = "aarch64"


class Layout(str, Enum):
    """Where QEMU runs in an instance Pod."""

    # In the exporter's container: the QEMU driver runs qemu-system-<arch> itself
    # (Jumpstarter 0.9.0, the release).
    EXPORTER = "exporter"
    # In a runtime sidecar the driver reaches through `launcher_socket` (Jumpstarter main).
    SIDECAR = "sidecar"


class FirmwareType(str, Enum):
    """What boots the guest: QEMU's SeaBIOS, or edk2's UEFI (OVMF, AAVMF)."""

    BIOS = "bios"
    UEFI = "uefi"


class QemuFirmware(BaseModel):
    model_config = OPEN

    url: Annotated[str, Field(min_length=1)] | None = None
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    type: FirmwareType | None = None


class QemuResources(BaseModel):
    model_config = OPEN

    cpu: Annotated[int, Field(ge=1, le=64, strict=True)] | None = None
    memory: str | None = None
    storage: str | None = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> str | None:
        return None if value is None else bytes_within(value, MEMORY_RANGE)

    @field_validator("storage", mode="before")
    @classmethod
    def _storage(cls, value: Any) -> str | None:
        return None if value is None else bytes_within(value, STORAGE_RANGE)


class QemuParameters(BaseModel):
    """Merged `parameters` of a class and set whose provisioner is qemu.jumpstarter.dev."""

    model_config = OPEN

    arch: Architecture | None = None
    machine_type: (
        Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9._-]*$")] | None
    ) = Field(default=None, alias="machineType")
    firmware: QemuFirmware | None = None
    resources: QemuResources | None = None
    storage: QemuStorage | None = None
    layout: Layout | None = None
