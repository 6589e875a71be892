"""The benchmarks' percentiles are nearest-rank: always a time that was measured."""

from __future__ import annotations

import pytest

from bench._stats import ms, percentile


def test_nearest_rank_percentiles() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 100) == 4.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 1) == 7.0


def test_percentile_refuses_what_it_cannot_answer() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 0)


def test_milliseconds() -> None:
    assert ms(0.00123) == "1.23"
    assert ms(-0.0005) == "-0.50"
