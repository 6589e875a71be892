"""Parameters of the `qemu.jumpstarter.dev` provisioner.

One instance is one QEMU virtual machine driven by the Jumpstarter QEMU driver in a Pod
next to the exporter. What such a target needs, all optional with the defaults below:

- `arch`: `x86_64` (default), `aarch64` or `riscv64`; the guest CPU architecture,
  which selects `qemu-system-<arch>`.
- `cpus`: integer 1-64, default 2; virtual CPUs.
- `memory`: quantity 128Mi-256Gi, default `2Gi`; guest RAM.
- `machine`: QEMU machine type (`q35`, `virt`, ...); default per architecture.
- `firmware`: `uefi` (default) or `bios`; `bios` only on x86_64.
- `disk.image`: URL or OCI reference of the boot image; optional.
- `disk.size`: quantity 1Gi-2Ti, default `10Gi`; the root disk of each instance.

Unknown keys are refused: a misspelt parameter would otherwise be silently ignored by
the provisioner. The webhook checks the deep merge of class and set parameters against
this model; the reconciler renders the Pod from the same model. No I/O.
"""

from __future__ import annotations

from decimal import Decimal
from enum import Enum
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.quantity import format_bytes, parse_quantity

__all__ = ["PROVISIONER", "Architecture", "Firmware", "QemuDisk", "QemuParameters"]

PROVISIONER = "qemu.jumpstarter.dev"

_MEMORY_RANGE = (parse_quantity("128Mi"), parse_quantity("256Gi"))
_DISK_RANGE = (parse_quantity("1Gi"), parse_quantity("2Ti"))


class Architecture(str, Enum):
    X86_64 = "x86_64"
    AARCH64 = "aarch64"
    RISCV64 = "riscv64"


class Firmware(str, Enum):
    BIOS = "bios"
    UEFI = "uefi"


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
    if amount != amount.to_integral_value():
        raise ValueError("must be a whole number of bytes")
    if not low <= amount <= high:
        raise ValueError(f"must be between {format_bytes(low)} and {format_bytes(high)}")
    return str(value)


_STRICT = ConfigDict(extra="forbid", use_enum_values=True, validate_default=True)


class QemuDisk(BaseModel):
    """The root disk of each instance."""

    model_config = _STRICT

    image: Annotated[str, Field(min_length=1)] | None = None
    size: str = "10Gi"

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: Any) -> str:
        return _bytes_within(value, _DISK_RANGE)

    @property
    def size_bytes(self) -> int:
        return int(parse_quantity(self.size))


class QemuParameters(BaseModel):
    """Merged `parameters` of a class and set whose provisioner is qemu.jumpstarter.dev."""

    model_config = _STRICT

    arch: Architecture = Architecture.X86_64
    cpus: Annotated[int, Field(ge=1, le=64, strict=True)] = 2
    memory: str = "2Gi"
    machine: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9.-]*$")] | None = None
    firmware: Firmware = Firmware.UEFI
    # A factory, not a shared instance: pydantic deep-copies a model default on every
    # validation, which cost more than the rest of the parameter check together.
    disk: QemuDisk = Field(default_factory=QemuDisk)

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> str:
        return _bytes_within(value, _MEMORY_RANGE)

    @model_validator(mode="after")
    def _bios_only_on_x86(self) -> QemuParameters:
        if self.firmware == Firmware.BIOS.value and self.arch != Architecture.X86_64.value:
            raise ValueError("firmware bios is only available on x86_64")
        return self

    @property
    def memory_bytes(self) -> int:
        return int(parse_quantity(self.memory))
