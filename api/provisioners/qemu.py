"""Parameters of the `qemu.jumpstarter.dev` provisioner, as Jumpstarter documents them.

The keys are Jumpstarter's (its design for scalable virtual exporters, JEP-0014, and its
own exporter-set controller), so a class or set written for Jumpstarter is admitted here
unchanged. All optional:

- `arch`: `x86_64` or `aarch64`; the guest architecture (`qemu-system-<arch>`).
- `machineType`: the QEMU machine type (`q35`, `virt`, ...).
- `firmware.url`: URL or OCI reference of a firmware or boot image;
  `firmware.digest`: `sha256:` and 64 hex digits.
- `resources.cpu`: virtual CPUs, an integer 1-64; `resources.memory`: guest RAM,
  128Mi-256Gi; `resources.storage`: root disk, 1Gi-2Ti. Sizes are Kubernetes quantities
  and must be whole KiB, so that QEMU's own size spelling can say them exactly.
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

from decimal import Decimal
from enum import Enum
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.jumpstarter import JUMPSTARTER_RELEASE, JUMPSTARTER_REPOSITORIES
from api.quantity import format_bytes, parse_quantity

__all__ = [
    "DEFAULT_IMAGES",
    "PROVISIONER",
    "QEMU_EXPORTER_IMAGE",
    "Architecture",
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

_MEMORY_RANGE = (parse_quantity("128Mi"), parse_quantity("256Gi"))
_STORAGE_RANGE = (parse_quantity("1Gi"), parse_quantity("2Ti"))
_KIB = 1024


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


def _bytes_within(value: Any, bounds: tuple[Decimal, Decimal]) -> str:
    """Validate a quantity in bytes and keep its original spelling."""
    if isinstance(value, str):
        return _bytes_string_within(value, bounds)
    return _checked_bytes(value, bounds)


@lru_cache(maxsize=1024)  # the same few sizes are checked on every admission and pass
def _bytes_string_within(value: str, bounds: tuple[Decimal, Decimal]) -> str:
    return _checked_bytes(value, bounds)


def _checked_bytes(value: Any, bounds: tuple[Decimal, Decimal]) -> str:
    amount = parse_quantity(value)
    low, high = bounds
    if amount % _KIB != 0:
        raise ValueError("must be a whole number of KiB (1024 bytes)")
    if not low <= amount <= high:
        raise ValueError(f"must be between {format_bytes(low)} and {format_bytes(high)}")
    return str(value)


_QEMU_UNITS = (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024))


def qemu_size(quantity: str) -> str:
    """A validated size as QEMU and qemu-img spell it: binary units without the `i`
    (`4Gi` -> `4G`, `1536Mi` -> `1536M`, `4G` -> `3906250K`). Never a bare number:
    `-m 512` means 512 MiB to QEMU."""
    amount = int(parse_quantity(quantity))
    for suffix, unit in _QEMU_UNITS:
        if amount % unit == 0:
            return f"{amount // unit}{suffix}"
    raise ValueError(f"{quantity!r} is not a whole number of KiB")


# Extra keys are allowed (and reported as warnings); known keys are strict.
_OPEN = ConfigDict(extra="allow", use_enum_values=True)


class QemuFirmware(BaseModel):
    model_config = _OPEN

    url: Annotated[str, Field(min_length=1)] | None = None
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None


class QemuResources(BaseModel):
    model_config = _OPEN

    cpu: Annotated[int, Field(ge=1, le=64, strict=True)] | None = None
    memory: str | None = None
    storage: str | None = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> str | None:
        return None if value is None else _bytes_within(value, _MEMORY_RANGE)

    @field_validator("storage", mode="before")
    @classmethod
    def _storage(cls, value: Any) -> str | None:
        return None if value is None else _bytes_within(value, _STORAGE_RANGE)


class QemuParameters(BaseModel):
    """Merged `parameters` of a class and set whose provisioner is qemu.jumpstarter.dev."""

    model_config = _OPEN

    arch: Architecture | None = None
    machine_type: (
        Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9._-]*$")] | None
    ) = Field(default=None, alias="machineType")
    firmware: QemuFirmware | None = None
    resources: QemuResources | None = None
    layout: Layout | None = None
