"""Go `time.ParseDuration` in Python.

ExporterSet `scaleDownCooldown` is a Go duration string (`300s`, `5m`, `1h30m`); the
webhook validates it and the reconciler waits for it, so both parse it here. No I/O.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["UNIT_NANOSECONDS", "parse_go_duration", "parse_go_duration_ns"]

UNIT_NANOSECONDS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu, also accepted by Go
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}

_TERM = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_MAX_NS = 2**63 - 1


@lru_cache(maxsize=4096)  # names and labels repeat across reviews
def parse_go_duration_ns(text: str) -> int:
    """Nanoseconds of a Go duration; ValueError with the reason when it is not one."""
    rest = text
    sign = 1
    if rest[:1] in ("+", "-"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total = Decimal(0)
    position = 0
    while position < len(rest):
        match = _TERM.match(rest, position)
        if match is None:
            raise ValueError(
                f"invalid duration {text!r}: expected a number followed by one of "
                "ns, us, ms, s, m, h"
            )
        try:
            total += Decimal(match.group(1)) * UNIT_NANOSECONDS[match.group(2)]
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
            raise ValueError(f"invalid duration {text!r}") from exc
        position = match.end()
    nanoseconds = int(total)
    if nanoseconds > _MAX_NS:
        raise ValueError(f"invalid duration {text!r}: out of range")
    return sign * nanoseconds


def parse_go_duration(text: str) -> timedelta:
    """A Go duration as a timedelta (microsecond precision)."""
    return timedelta(microseconds=parse_go_duration_ns(text) / 1_000)
