"""The demand estimator: how large a warm buffer a pool needs, from its lease arrivals
and its boot times. Pure and deterministic (no I/O, no clock): the planner, the
simulation and the property tests call the same functions.

In two lines: the buffer is the smallest `b` such that the leases arriving within one
boot time (its p95, less the target wait) exceed `b` with probability at most `risk`
(5%), arrivals being Poisson at the pool's recent rate. Never below
`minAvailableReplicas`, never above `maxReplicas`.

- Rate: an exponentially decaying average of arrivals, time constant `window` (the
  pool's `demand-window`, 10m by default): after n arrivals at t_i the rate at t is
  sum(exp(-(t - t_i) / window)) / window. It composes: advancing the memory once or in
  many steps gives the same rate, so writing it once a minute loses nothing.
- Boot time: the p95 (nearest rank) of the last `SAMPLES` boots the pool has seen, from
  creation to Registered; the pool's `boot-estimate` until it has seen one.
- Hysteresis: the buffer rises as soon as the quantile at the rate asks for more, and
  falls only to what would still hold at (1 + HYSTERESIS) times the rate, so a rate that
  wavers by less than that leaves it alone. Instances the lower buffer leaves over go
  with the pool's `scaleDownCooldown`, as any surplus.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pool.model.demand import DemandMemory

__all__ = [
    "HYSTERESIS",
    "RISK",
    "SAMPLES",
    "Estimate",
    "advance",
    "boot_p95",
    "estimate",
    "poisson_quantile",
    "rate_at",
    "sized_buffer",
]

RISK = 0.05  # P(arrivals within one boot time > buffer) allowed
HYSTERESIS = 0.25  # the buffer falls only when it would at (1 + HYSTERESIS) x the rate
SAMPLES = 20  # boots kept for the p95
_SLACK = 1e-12  # float noise in the tail sum


def rate_at(memory: DemandMemory, moment: datetime, window: timedelta) -> float:
    """The remembered rate decayed to `moment` (no arrivals since)."""
    elapsed = max(0.0, (moment - memory.at).total_seconds())
    return memory.rate * math.exp(-elapsed / window.total_seconds())


def advance(
    memory: DemandMemory,
    arrivals: Iterable[datetime],
    boots: Iterable[tuple[datetime, float]],
    until: datetime,
    window: timedelta,
) -> DemandMemory:
    """The memory learned up to `until`: the arrivals and boots (when it registered, how
    long it took) in (memory.at, until] added, the rest ignored (already counted, or not
    yet due). `buffer` is left as it was."""
    if until <= memory.at:
        return memory
    tau = window.total_seconds()
    rate = rate_at(memory, until, window) + sum(
        math.exp(-(until - t).total_seconds() / tau) / tau
        for t in arrivals
        if memory.at < t <= until
    )
    new_boots = [seconds for t, seconds in sorted(boots) if memory.at < t <= until]
    kept = (*memory.boots, *new_boots)[-SAMPLES:]
    return replace(memory, at=until, rate=rate, boots=kept)


def boot_p95(boots: tuple[float, ...], estimate: timedelta) -> timedelta:
    """The p95 (nearest rank) of the boots seen; `estimate` while there are none."""
    if not boots:
        return estimate
    ranked = sorted(boots)
    return timedelta(seconds=ranked[math.ceil(0.95 * len(ranked)) - 1])


def poisson_quantile(mean: float, risk: float = RISK, cap: int | None = None) -> int:
    """The smallest b with P(Poisson(mean) > b) <= risk; at most `cap` when given."""
    if mean <= 0:
        return 0
    limit = cap if cap is not None else int(mean + 40 * math.sqrt(mean) + 40)
    below, b = 0.0, 0
    while True:
        below += math.exp(-mean + b * math.log(mean) - math.lgamma(b + 1))
        if 1.0 - below <= risk + _SLACK or b >= limit:
            return b
        b += 1


def sized_buffer(mean: float, current: int, floor: int, ceiling: int, risk: float = RISK) -> int:
    """The buffer for `mean` arrivals per boot time, from the `current` one, under the
    hysteresis; between `floor` and `ceiling` (0: none), the floor winning."""
    cap = ceiling or None
    up = poisson_quantile(mean, risk, cap)
    down = poisson_quantile(mean * (1 + HYSTERESIS), risk, cap)
    held = max(up, min(current, down))
    if ceiling:
        held = min(held, ceiling)
    return max(floor, held)


@dataclass(frozen=True, slots=True)
class Estimate:
    """The buffer in force and why: the rate (leases a second), the boot p95 and the
    window (boot p95 less the target wait) it was sized for."""

    buffer: int
    rate: float
    boot: timedelta
    target: timedelta
    window: timedelta

    def reason(self) -> str:
        return (
            f"warm buffer {self.buffer} from demand: {self.rate * 60:.2f} leases/min, "
            f"boot p95 {_seconds(self.boot)}, target wait {_seconds(self.target)}"
        )


def _seconds(span: timedelta) -> str:
    return f"{span.total_seconds():g}s"


def estimate(
    memory: DemandMemory,
    boot_estimate: timedelta,
    target: timedelta,
    floor: int,
    ceiling: int,
    risk: float = RISK,
) -> Estimate:
    """The buffer a pool with this memory keeps now (its `at`)."""
    boot = boot_p95(memory.boots, boot_estimate)
    window = max(timedelta(0), boot - target)
    mean = memory.rate * window.total_seconds()
    buffer = sized_buffer(mean, memory.buffer, floor, ceiling, risk)
    return Estimate(buffer, memory.rate, boot, target, window)
