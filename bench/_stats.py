"""Percentiles and formatting shared by the benchmarks that time single requests."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["ms", "percentile"]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile: the smallest value with at least q% of the values at
    or below it (p50 of 1..4 is 2, p99 of 100 values is the 99th). No interpolation, so
    a p99 is always a time that was measured."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} outside (0, 100]")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    """Seconds as milliseconds with two decimals (signed, for differences)."""
    return f"{seconds * 1000:.2f}"
