"""A histogram kept as plain arithmetic and turned into a Prometheus family only when
scraped: prometheus_client's own takes a lock on every observation."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["Histogram"]


@dataclass
class Histogram:
    """Counts per bucket (the last one is +Inf), and the sum of the observed values."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """(upper bound, observations at or below it), as HistogramMetricFamily takes them."""
        running, out = 0, []
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, float(running)))
        return out

    def copy(self) -> Histogram:
        return Histogram(self.bounds, list(self.counts), self.total)
