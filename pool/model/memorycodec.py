"""The JSON a pool keeps in a memory annotation (its backoff, its demand): one writing and
one tolerant reading. A value someone edited into nonsense is forgotten, not fatal: the
reading answers None and never raises. Pure; no I/O.

A memory's `build` reads the fields it needs from the decoded object with the checks
below; any missing key or wrong type makes the whole value unreadable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TypeVar

from pool.model.timefmt import parse_time

__all__ = ["count", "decode_memory", "encode_memory", "moment", "number", "text"]

T = TypeVar("T")


def encode_memory(fields: Mapping[str, object]) -> str:
    """The annotation's value: compact, keys sorted (the same memory writes the same text,
    so an unchanged memory is no write)."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def decode_memory(value: object, build: Callable[[Mapping[str, object]], T]) -> T | None:
    """What `build` makes of the JSON object an annotation value holds; None when the value
    is absent, not JSON, not an object, or `build` finds a key missing or of a wrong type."""
    if not isinstance(value, str) or not value:
        return None
    try:
        raw = json.loads(value)
        if not isinstance(raw, dict):
            return None
        return build(raw)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def moment(value: object) -> datetime:
    """A time the memory wrote, to whole seconds (as the API writes times)."""
    if not isinstance(value, str):
        raise TypeError("a time is a string")
    return parse_time(value).replace(microsecond=0)


def count(value: object, least: int = 0) -> int:
    """A whole number of at least `least` (a JSON true is not a number)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError("not a count")
    return value


def number(value: object) -> float:
    """A finite number of at least zero."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError("not a number")
    if not math.isfinite(value) or value < 0:
        raise ValueError("not a finite number of at least zero")
    return float(value)


def text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value
