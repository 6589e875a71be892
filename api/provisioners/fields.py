"""What the QEMU parameter models share (`api.provisioners.qemu`, and its guest disk in
`api.provisioners.qemu_storage`): guest sizes, Kubernetes quantities of whole KiB within a
range, and how QEMU spells them; and the models' config: extra keys allowed (reported as
warnings), known keys strict. No I/O.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any

from pydantic import ConfigDict

from api.quantity import format_bytes, parse_quantity

__all__ = ["MEMORY_RANGE", "OPEN", "STORAGE_RANGE", "bytes_within", "qemu_size"]

# Extra keys are allowed (and reported as warnings); known keys are strict.
OPEN = ConfigDict(extra="allow", use_enum_values=True)

MEMORY_RANGE = (parse_quantity("128Mi"), parse_quantity("256Gi"))
STORAGE_RANGE = (parse_quantity("1Gi"), parse_quantity("2Ti"))
_KIB = 1024


def bytes_within(value: Any, bounds: tuple[Decimal, Decimal]) -> str:
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
