"""The guest's disk of a `qemu.jumpstarter.dev` instance: `parameters.storage`, as
Jumpstarter main settled it (its change #928, `controller/internal/exporterset/disk`).
All optional, deep-merged from class to set like every parameter:

- `size`: the guest's disk, a quantity string (a number is refused), default `10Gi`;
  here also whole KiB and 1Gi-2Ti, as `resources.storage` was (so QEMU's own spelling of
  `disk_size` says it exactly). An empty string is the default, as there.
- `fsOverhead`: a percentage string, a whole number of percent and not negative, read as
  Go's `strconv.Atoi` reads it once the `%` and surrounding spaces are gone; the volume is
  `size` plus this much. Default `10%`, `"0%"` none, `""` the default.
- `storageClassName`: empty or absent, the volume is an emptyDir; otherwise a generic
  ephemeral volume whose claim asks this StorageClass (an object name, as the apiserver
  checks a claim's). An explicit `""` on the set overrides the class's.
- `accessModes`: that claim's, default `[ReadWriteOnce]`: Kubernetes' four modes, and
  `ReadWriteOncePod` alone (the apiserver refuses a claim that combines it).

`guest_disk` resolves them into what an instance Pod gets. `resources.storage`, where the
disk was before, still sizes it where `storage.size` is unset (`RENAMED`: admission warns
and names the new key; Jumpstarter main no longer reads it). No I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator

from api.labels import dns_subdomain_errors
from api.provisioners.fields import OPEN, STORAGE_RANGE, bytes_within
from api.quantity import canonical_bytes, parse_quantity, quantity_format

__all__ = [
    "DEFAULT_ACCESS_MODES",
    "DEFAULT_FS_OVERHEAD",
    "DEFAULT_SIZE",
    "MAX_FS_OVERHEAD",
    "RENAMED",
    "AccessMode",
    "ClaimStorage",
    "GuestDisk",
    "QemuStorage",
    "guest_disk",
    "overhead_percent",
]

DEFAULT_SIZE = "10Gi"
DEFAULT_FS_OVERHEAD = "10%"
# Keys that moved: (old path, new path) under `parameters`.
RENAMED = (("resources.storage", "storage.size"),)
# The largest overhead whose volume on the largest disk Kubernetes still counts in an
# int64 of bytes (Jumpstarter's controller multiplies in one and would wrap around).
MAX_FS_OVERHEAD = (2**63 - 1) // int(STORAGE_RANGE[1]) - 100
_ATOI = re.compile(r"[+-]?[0-9]+")


class AccessMode(str, Enum):
    """A claim's access modes, as the apiserver accepts them."""

    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_ONLY_MANY = "ReadOnlyMany"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"


DEFAULT_ACCESS_MODES = (AccessMode.READ_WRITE_ONCE.value,)


def _not_a_number(value: Any, example: str) -> None:
    if isinstance(value, bool | int | float):
        raise ValueError(f'must be a string such as "{example}", not a number')
    if not isinstance(value, str):
        raise ValueError(f'must be a string such as "{example}"')


def overhead_percent(value: str | None) -> int:
    """The percent an `fsOverhead` string names (None and `""`: the default)."""
    text = (value or "").strip() or DEFAULT_FS_OVERHEAD
    number = text.removesuffix("%").strip()
    if not text.endswith("%") or not _ATOI.fullmatch(number):
        raise ValueError(f'must be a whole percentage such as "{DEFAULT_FS_OVERHEAD}"')
    percent = int(number)
    if percent < 0:
        raise ValueError("must not be negative")
    if percent > MAX_FS_OVERHEAD:
        raise ValueError(f"must be at most {MAX_FS_OVERHEAD}%")
    return percent


class ClaimStorage(BaseModel):
    """What a volume claim of the guest's disk is asked with: its StorageClass and access
    modes, as the apiserver checks them (QEMU's `storage`, KubeVirt's DataVolume)."""

    model_config = OPEN

    storage_class_name: str | None = Field(default=None, alias="storageClassName")
    access_modes: Annotated[list[AccessMode], Field(min_length=1)] | None = Field(
        default=None, alias="accessModes"
    )

    @field_validator("storage_class_name", mode="before")
    @classmethod
    def _class_name(cls, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError("must be the name of a StorageClass, a string")
        reasons = dns_subdomain_errors(value) if value else ()
        if reasons:
            raise ValueError("; ".join(reasons))
        return value

    @field_validator("access_modes")
    @classmethod
    def _alone(cls, value: list[AccessMode] | None) -> list[AccessMode] | None:
        once_pod = AccessMode.READ_WRITE_ONCE_POD.value
        if value and once_pod in value and any(mode != once_pod for mode in value):
            raise ValueError(f"may not use {once_pod} with other access modes")
        return value


class _Sizes(BaseModel):
    """QEMU's disk and volume sizes."""

    model_config = OPEN

    size: str | None = None
    fs_overhead: str | None = Field(default=None, alias="fsOverhead")

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: Any) -> str | None:
        if value is None:
            return None
        _not_a_number(value, DEFAULT_SIZE)
        return bytes_within(value, STORAGE_RANGE) if value else value

    @field_validator("fs_overhead", mode="before")
    @classmethod
    def _overhead(cls, value: Any) -> str | None:
        if value is None:
            return None
        _not_a_number(value, DEFAULT_FS_OVERHEAD)
        overhead_percent(value)
        return str(value)


class QemuStorage(ClaimStorage, _Sizes):
    """`parameters.storage` of a class, or of a set merged over its class's: the sizes'
    keys first (admission's warnings list the known keys in this order)."""


@dataclass(frozen=True, slots=True)
class GuestDisk:
    """What an instance Pod gets for the guest's disk."""

    size: str  # the guest's disk as the pool names it (the driver's disk_size); "": not named
    volume: str  # the volume: the size (or DEFAULT_SIZE) plus fsOverhead, canonical
    storage_class: str  # the claim's StorageClass; "": an emptyDir
    access_modes: tuple[str, ...]


def guest_disk(storage: QemuStorage | None, legacy_size: str | None = None) -> GuestDisk:
    """The disk of valid parameters: `storage`, and `resources.storage` (`legacy_size`)
    where `storage.size` is unset. The volume is sized as Jumpstarter's controller sizes
    it (whole bytes, the overhead rounded down) and printed as resource.Quantity prints
    it in the size's own format: `10Gi` at 10% is `11Gi`, `1Gi` is `1181116006`."""
    storage = storage or QemuStorage()
    named = storage.size or legacy_size or ""
    size = named or DEFAULT_SIZE
    amount = math.ceil(parse_quantity(size))
    grown = amount * (100 + overhead_percent(storage.fs_overhead)) // 100
    modes = tuple(AccessMode(m).value for m in storage.access_modes or DEFAULT_ACCESS_MODES)
    return GuestDisk(
        size=named,
        volume=canonical_bytes(grown, quantity_format(size)),
        storage_class=storage.storage_class_name or "",
        access_modes=modes,
    )
