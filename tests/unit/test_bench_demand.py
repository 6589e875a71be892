"""The demand benchmark's baseline: the smallest fixed buffer whose p95 wait is at most
auto's, measured on the same trace."""

from __future__ import annotations

from bench.demand import SCENARIOS, prepared, row
from pool.simulation.simulate import simulate


def test_the_baseline_is_the_smallest_fixed_buffer_reaching_auto_s_p95() -> None:
    office = SCENARIOS / "office-hours.yaml"
    found = row(office, 1)
    auto, fixed, buffer = found["auto"], found["fixed"], found["buffer"]
    assert auto.auto and not fixed.auto
    assert found["reached"] and fixed.percentile(95) <= auto.percentile(95)
    assert found["ratio"] == auto.idle_minutes / fixed.idle_minutes
    if buffer:  # one instance fewer does not reach it
        scenario = prepared(office, 1)
        smaller = simulate(scenario, {**scenario["pool"], "minAvailableReplicas": buffer - 1}, "")
        assert smaller.percentile(95) > auto.percentile(95)
