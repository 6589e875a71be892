"""Planner inputs and outputs to JSON and back, exactly.

Dataclasses are written as `{"@": class name, field: value, ...}` with fields equal to
their default left out; datetimes, timedeltas, enums, tuples, frozensets and mappings with
keys other than strings are tagged, so a decoded observation equals the recorded one.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from tests.plancorpus import layout

_MISSING = dataclasses.MISSING


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not _MISSING:
        return field.default
    if field.default_factory is not _MISSING:
        return field.default_factory()
    return _MISSING


def encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return {"@dt": value.isoformat()}
    if isinstance(value, timedelta):
        return {"@td": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, Enum):
        return {"@enum": type(value).__name__, "v": value.name}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"@": type(value).__name__}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            default = _default(field)
            if default is _MISSING or type(item) is not type(default) or item != default:
                out[field.name] = encode(item)
        return out
    if isinstance(value, tuple):
        return {"@t": [encode(v) for v in value]}
    if isinstance(value, frozenset | set):
        items = sorted((encode(v) for v in value), key=repr)
        return {"@fs" if isinstance(value, frozenset) else "@set": items}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if hasattr(value, "items"):
        pairs = list(value.items())
        if all(isinstance(k, str) and not k.startswith("@") for k, _ in pairs):
            return {k: encode(v) for k, v in pairs}
        return {"@map": [[encode(k), encode(v)] for k, v in pairs]}
    raise TypeError(f"cannot encode {type(value).__name__}: {value!r}")


def decoder() -> Any:
    """A decode function bound to the layout's types."""
    known = layout.types()

    def decode(value: Any) -> Any:
        if isinstance(value, list):
            return [decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "@" in value:
            cls = known[value["@"]]
            return cls(**{k: decode(v) for k, v in value.items() if k != "@"})
        if "@dt" in value:
            return datetime.fromisoformat(value["@dt"])
        if "@td" in value:
            days, seconds, micros = value["@td"]
            return timedelta(days=days, seconds=seconds, microseconds=micros)
        if "@enum" in value:
            return known[value["@enum"]][value["v"]]  # type: ignore[index]
        if "@t" in value:
            return tuple(decode(v) for v in value["@t"])
        if "@fs" in value:
            return frozenset(decode(v) for v in value["@fs"])
        if "@set" in value:
            return {decode(v) for v in value["@set"]}
        if "@map" in value:
            return {decode(k): decode(v) for k, v in value["@map"]}
        return {k: decode(v) for k, v in value.items()}

    return decode
