"""A warm buffer sized from demand against fixed buffers, on the example scenarios.

For each scenario of examples/scenarios/ and each seed, the simulation (the real planner
and the real demand estimator, `pool.simulation.simulate`) runs the pool once with
`warmBuffer: auto` (floor 0) and once with every fixed `minAvailableReplicas` from 0 up:
the baseline is the smallest fixed buffer whose lease-wait p95 is at most auto's, and the
figure is auto's idle instance-minutes over that baseline's, both measured in this run on
the same trace. The goal is a ratio of at most 0.8. The class is made Immediate for both
(a WaitForFirstConsumer class keeps no buffer, fixed or auto).

    python -m bench demand [SEEDS]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from pool.simulation.simulate import Outcome, simulate

SCENARIOS = Path(__file__).resolve().parent.parent / "examples" / "scenarios"
GOAL = 0.8


def _baseline(scenario: dict[str, Any], base: dict[str, Any], p95: float) -> tuple[int, Outcome]:
    """The smallest fixed buffer whose p95 wait is at most `p95`, and its outcome."""
    ceiling = int(base.get("maxReplicas") or 0) or 40
    last: tuple[int, Outcome] | None = None
    for buffer in range(ceiling + 1):
        fixed = simulate(scenario, {**base, "minAvailableReplicas": buffer}, f"fixed {buffer}")
        last = buffer, fixed
        if fixed.percentile(95) <= p95 + 1e-9:
            return last
    assert last is not None
    return last  # no fixed buffer reaches it: the largest, said so in the table


def prepared(path: Path, seed: int) -> dict[str, Any]:
    """The scenario as the benchmark runs it: this seed, no variants, class Immediate."""
    scenario: dict[str, Any] = {**yaml.safe_load(path.read_text()), "seed": seed, "variants": []}
    scenario["class"] = {**(scenario.get("class") or {}), "bindingMode": "Immediate"}
    return scenario


def row(path: Path, seed: int) -> dict[str, Any]:
    """Auto and its baseline on one trace."""
    scenario = prepared(path, seed)
    base = dict(scenario.get("pool") or {})
    auto = simulate(scenario, {**base, "minAvailableReplicas": 0, "warmBuffer": "auto"}, "auto")
    buffer, fixed = _baseline(scenario, base, auto.percentile(95))
    ratio = auto.idle_minutes / fixed.idle_minutes if fixed.idle_minutes else float("inf")
    return {
        "scenario": str(scenario.get("name", path.stem)),
        "seed": seed,
        "auto": auto,
        "buffer": buffer,
        "fixed": fixed,
        "reached": fixed.percentile(95) <= auto.percentile(95) + 1e-9,
        "ratio": ratio,
    }


def main(argv: list[str] | None = None) -> str:
    seeds = int((argv or ["3"])[0])
    lines = [
        "| scenario | seed | auto p50 / p95 wait (min) | auto idle inst-min | auto max buffer "
        "| baseline: smallest fixed buffer with p95 <= auto's | its p50 / p95 (min) "
        "| its idle inst-min | auto / fixed idle |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios: dict[str, list[float]] = {}
    for path in sorted(SCENARIOS.glob("*.yaml")):
        for seed in range(1, seeds + 1):
            found = row(path, seed)
            auto, fixed = found["auto"], found["fixed"]
            ratios.setdefault(found["scenario"], []).append(found["ratio"])
            peak = max((s.warm for s in auto.samples), default=0)
            reached = "" if found["reached"] else " (none reaches it; the largest)"
            lines.append(
                f"| {found['scenario']} | {seed} "
                f"| {auto.percentile(50):.2f} / {auto.percentile(95):.2f} "
                f"| {auto.idle_minutes:.0f} | {peak} | {found['buffer']}{reached} "
                f"| {fixed.percentile(50):.2f} / {fixed.percentile(95):.2f} "
                f"| {fixed.idle_minutes:.0f} | {found['ratio']:.2f} |"
            )
    lines.append("")
    for name, values in ratios.items():
        median = statistics.median(values)
        verdict = "meets" if median <= GOAL else "misses"
        lines.append(f"{name}: median auto / fixed idle {median:.2f}, {verdict} the goal {GOAL}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
