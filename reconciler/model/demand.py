"""What a pool with `warm-buffer: auto` remembers of its demand (the DEMAND annotation of
the set, or of its memory Lease), so that a restart or a new leader starts from it and not
from zero (`reconciler.rules.demand` learns it). Pure; no I/O.

- `at`: the moment it was learned up to (whole seconds, as the API writes times): lease
  arrivals and boots after it are new;
- `rate`: lease arrivals per second at `at`, an exponentially decaying average;
- `boots`: the boot times (creation to Registered, seconds) of the pool's latest
  instances, oldest first;
- `buffer`: the warm buffer in force at `at` (the hysteresis starts from it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime

from reconciler.model.timefmt import format_time, parse_time

__all__ = ["DemandMemory", "decode_demand", "encode_demand"]


@dataclass(frozen=True, slots=True)
class DemandMemory:
    at: datetime
    rate: float = 0.0
    boots: tuple[float, ...] = ()
    buffer: int = 0


def encode_demand(memory: DemandMemory) -> str:
    """The DEMAND annotation's value."""
    return json.dumps(
        {
            "at": format_time(memory.at),
            "rate": memory.rate,
            "boots": list(memory.boots),
            "buffer": memory.buffer,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def _number(value: object) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and value >= 0


def decode_demand(text: object) -> DemandMemory | None:
    """The memory an annotation value holds; None when absent or unreadable (a value
    someone edited into nonsense is forgotten, not fatal)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        raw = json.loads(text)
        at, rate, boots, buffer = parse_time(raw["at"]), raw["rate"], raw["boots"], raw["buffer"]
    except (ValueError, KeyError, TypeError):
        return None
    if not _number(rate) or not isinstance(boots, list) or not all(map(_number, boots)):
        return None
    if not isinstance(buffer, int) or isinstance(buffer, bool) or buffer < 0:
        return None
    return DemandMemory(at.replace(microsecond=0), float(rate), tuple(map(float, boots)), buffer)
