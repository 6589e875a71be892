"""What a pool with `warm-buffer: auto` remembers of its demand (the DEMAND annotation of
the set, or of its memory Lease), so that a restart or a new leader starts from it and not
from zero (`pool.rules.demand` learns it). Pure; no I/O.

- `at`: the moment it was learned up to (whole seconds, as the API writes times): lease
  arrivals and boots after it are new;
- `rate`: lease arrivals per second at `at`, an exponentially decaying average;
- `boots`: the boot times (creation to Registered, seconds) of the pool's latest
  instances, oldest first;
- `buffer`: the warm buffer in force at `at` (the hysteresis starts from it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pool.model.memorycodec import count, decode_memory, encode_memory, moment, number
from pool.model.timefmt import format_time

__all__ = ["DemandMemory", "decode_demand", "encode_demand"]


@dataclass(frozen=True, slots=True)
class DemandMemory:
    at: datetime
    rate: float = 0.0
    boots: tuple[float, ...] = ()
    buffer: int = 0


def encode_demand(memory: DemandMemory) -> str:
    """The DEMAND annotation's value."""
    return encode_memory(
        {
            "at": format_time(memory.at),
            "rate": memory.rate,
            "boots": list(memory.boots),
            "buffer": memory.buffer,
        }
    )


def _demand(raw: Mapping[str, object]) -> DemandMemory:
    boots = raw["boots"]
    if not isinstance(boots, list):
        raise TypeError("boots is a list")
    return DemandMemory(
        moment(raw["at"]), number(raw["rate"]), tuple(map(number, boots)), count(raw["buffer"])
    )


def decode_demand(value: object) -> DemandMemory | None:
    """The memory an annotation value holds; None when absent or unreadable."""
    return decode_memory(value, _demand)
