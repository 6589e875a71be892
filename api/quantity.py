"""Kubernetes resource quantities (`500m`, `1Gi`, `2e3`) as exact decimals.

Used to check `scheduling.resources` (requests must not exceed limits) and the
provisioner parameters (memory, disk size). Mirrors k8s.io/apimachinery resource.Quantity
parsing closely enough to accept and refuse the same strings. No I/O.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["format_bytes", "parse_quantity"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)


def parse_quantity(value: Any) -> Decimal:
    """The exact value of a quantity string or JSON number; ValueError if it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"quantity must be a string or a number, not {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise ValueError(f"quantity must be a string or a number, not {type(value).__name__}")
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (got {value!r})"
        )
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"invalid quantity {value!r}") from exc
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return number * (Decimal(1024) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def format_bytes(amount: Decimal) -> str:
    """A byte count in the largest binary unit that divides it (`1Gi`), for messages."""
    for suffix, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
        unit = Decimal(1024) ** power
        if amount >= unit and amount % unit == 0:
            return f"{int(amount / unit)}{suffix}"
    return str(amount.normalize())
