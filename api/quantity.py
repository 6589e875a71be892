"""Kubernetes resource quantities (`500m`, `1Gi`, `2e3`) as exact decimals.

Used to check `scheduling.resources` (requests must not exceed limits) and the
provisioner parameters (memory, disk size). Mirrors k8s.io/apimachinery resource.Quantity
parsing closely enough to accept and refuse the same strings, and its canonical spelling
of a whole number of bytes (`canonical_bytes`): what a Go controller sends, and what the
apiserver stores. No I/O.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "canonical_bytes",
    "format_bytes",
    "parse_quantity",
    "quantity_format",
]

# resource.Quantity's formats: the one a quantity is parsed in is the one it is printed in.
BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"

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


_DECIMAL_SUFFIXES = {exponent: suffix for suffix, exponent in _DECIMAL.items() if exponent >= 0}
_BINARY_SUFFIXES = {power: suffix for suffix, power in _BINARY.items()}


def quantity_format(value: str) -> str:
    """The format resource.ParseQuantity gives `value`: a binary suffix (`Ki`...`Ei`) is
    BinarySI, an exponent (`e3`) DecimalExponent, anything else DecimalSI."""
    match = _QUANTITY.fullmatch(value)
    suffix = (match.group("suffix") if match else None) or ""
    if suffix in _BINARY:
        return BINARY_SI
    return DECIMAL_EXPONENT if len(suffix) > 1 else DECIMAL_SI


def canonical_bytes(amount: int, form: str) -> str:
    """A whole number as resource.Quantity's CanonicalizeBytes spells it in `form`:
    BinarySI in the largest power of 1024 that divides it (below 1024, or none dividing,
    the plain number), the decimal formats with an exponent that is a multiple of 3
    (`1100M`, `11e9`). So `NewQuantity(11811160064, BinarySI)` is `11Gi`."""
    if amount == 0:
        return "0"
    if form == BINARY_SI and abs(amount) >= 1024:
        power = 0
        while amount % 1024 == 0 and power < max(_BINARY_SUFFIXES):
            amount //= 1024
            power += 1
        return f"{amount}{_BINARY_SUFFIXES.get(power, '')}"
    exponent = 0
    while amount % 10 == 0:
        amount //= 10
        exponent += 1
    amount *= 10 ** (exponent % 3)
    exponent -= exponent % 3
    if form == DECIMAL_EXPONENT:
        return f"{amount}e{exponent}" if exponent else str(amount)
    suffix = _DECIMAL_SUFFIXES.get(exponent)
    return f"{amount}{suffix}" if suffix is not None else f"{amount}e{exponent}"
