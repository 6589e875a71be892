"""Replay a lease-demand trace through the planner on a simulated clock.

What a platform team wants to know before choosing `minAvailableReplicas`: how long
lease requests wait for an exporter, and how many instance-minutes sit idle to buy
that. A scenario gives the pool spec (defaults from the schema, as in the cluster),
the class, how long an instance takes to boot, and the demand: explicit leases and/or
windows of Poisson arrivals. Optional `variants` rerun the same trace with other pool
settings, one row each; `warmBuffer: auto` (with `targetLeaseWait`, default `0s`) sizes
the buffer from demand as the set's annotations would (`api.warmbuffer`), the scenario's
`boot` being the pool's boot estimate. The planner and the demand estimator are the real
ones; everything around them is `pool.simulation.world.World`. No I/O here (the
CLI reads and writes files).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from api.duration import parse_go_duration
from api.warmbuffer import BOOT_ESTIMATE, TARGET_LEASE_WAIT, WARM_BUFFER, annotation_errors
from pool.model.actions import CreateExporter, Remove, Retain
from pool.model.adapt import class_view, pool_view
from pool.rules.buckets import Bucket
from pool.simulation.world import World

__all__ = ["Outcome", "Sample", "ScenarioError", "run_scenario", "simulate"]

START = datetime(2026, 1, 1, tzinfo=UTC)


class ScenarioError(ValueError):
    """The scenario file is not usable; the message names the field."""


@dataclass(frozen=True, slots=True)
class Sample:
    minute: float
    total: int
    busy: int
    available: int
    pending: int
    warm: int = 0  # the warm buffer in force


@dataclass
class Outcome:
    label: str
    waits: list[float] = field(default_factory=list)  # minutes, per lease
    unserved: int = 0  # leases still waiting at the end (counted with their wait so far)
    idle_minutes: float = 0.0
    peak: int = 0
    scale_events: int = 0
    samples: list[Sample] = field(default_factory=list)
    auto: bool = False  # the buffer sized from demand

    def percentile(self, q: float) -> float:
        if not self.waits:
            return 0.0
        if len(self.waits) == 1:
            return self.waits[0]
        return statistics.quantiles(self.waits, n=100, method="inclusive")[round(q) - 1]


def _duration(value: Any, where: str) -> timedelta:
    try:
        return parse_go_duration(str(value))
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _arrivals(scenario: Mapping[str, Any]) -> list[tuple[timedelta, timedelta]]:
    """(arrival offset, hold) of every lease, explicit ones and Poisson windows."""
    rng = random.Random(scenario.get("seed", 1))
    result: list[tuple[timedelta, timedelta]] = []
    for index, lease in enumerate(scenario.get("leases") or []):
        where = f"leases[{index}]"
        result.append(
            (_duration(lease["at"], f"{where}.at"), _duration(lease["hold"], f"{where}.hold"))
        )
    for index, window in enumerate(scenario.get("demand") or []):
        where = f"demand[{index}]"
        start, end = (
            _duration(window["from"], f"{where}.from"),
            _duration(window["to"], f"{where}.to"),
        )
        per_minute = float(window["leasesPerHour"]) / 60
        hold = _duration(window["hold"], f"{where}.hold")
        jitter = float(window.get("holdJitter", 0.5))
        t = start
        while per_minute > 0:
            t += timedelta(minutes=rng.expovariate(per_minute))
            if t >= end:
                break
            factor = 1 + rng.uniform(-jitter, jitter)
            result.append((t, timedelta(seconds=hold.total_seconds() * factor)))
    return sorted(result, key=lambda pair: pair[0])


# scenario pool keys that are annotations of the set, not spec fields
_ANNOTATED = {"warmBuffer": WARM_BUFFER, "targetLeaseWait": TARGET_LEASE_WAIT}


def _set(scenario: Mapping[str, Any], pool_spec: Mapping[str, Any], label: str) -> dict[str, Any]:
    """The ExporterSet a scenario's pool stands for."""
    spec = {k: v for k, v in pool_spec.items() if k not in _ANNOTATED}
    annotations = {_ANNOTATED[k]: str(v) for k, v in pool_spec.items() if k in _ANNOTATED}
    annotations[BOOT_ESTIMATE] = str(scenario.get("boot", "2m"))
    wrong = annotation_errors(annotations)
    if wrong:
        raise ScenarioError(f"{label}: {wrong[0]}")
    meta = {"name": "sim", "namespace": "sim", "generation": 1, "annotations": annotations}
    return {"metadata": meta, "spec": spec}


def simulate(scenario: Mapping[str, Any], pool_spec: Mapping[str, Any], label: str) -> Outcome:
    view, problem = pool_view(_set(scenario, pool_spec, label))
    if problem is not None:
        raise ScenarioError(f"{label}: {problem[1]}")
    klass = class_view({"metadata": {"name": "sim"}, "spec": dict(scenario.get("class") or {})})
    world = World(pool=view, klass=klass, boot=_duration(scenario.get("boot", "2m"), "boot"))
    step = _duration(scenario.get("step", "30s"), "step")
    end = START + _duration(scenario.get("duration", "8h"), "duration")
    arrivals = _arrivals(scenario)
    outcome = Outcome(label, auto=view.sizing.auto)
    now, cursor = START, 0
    while now <= end:
        while cursor < len(arrivals) and START + arrivals[cursor][0] <= now:
            offset, hold = arrivals[cursor]
            world.request(f"lease-{cursor}", START + offset, hold)
            cursor += 1
        world.advance(now)
        result = world.step(now)
        world.assign(now)
        outcome.scale_events += sum(
            isinstance(a, CreateExporter | Remove | Retain) for a in result.actions
        )
        counts = result.buckets
        minutes = (now - START).total_seconds() / 60
        available = sum(1 for n in world.instances if _available(world, n))
        busy = counts[Bucket.BUSY]
        pending = sum(1 for r in world.requests.values() if not r.exporter and not r.ended)
        total = len(world.instances)
        outcome.samples.append(Sample(minutes, total, busy, available, pending, result.warm))
        outcome.idle_minutes += available * step.total_seconds() / 60
        outcome.peak = max(outcome.peak, len(world.instances))
        now += step
    for request in world.requests.values():
        if request.assigned is not None:
            outcome.waits.append((request.assigned - request.asked).total_seconds() / 60)
        else:
            outcome.unserved += 1
            outcome.waits.append((end - request.asked).total_seconds() / 60)
    return outcome


def _available(world: World, name: str) -> bool:
    inst = world.instances[name]
    return (
        inst.enabled and inst.registered and inst.online and not inst.lease and not world.busy(name)
    )


def run_scenario(scenario: Mapping[str, Any]) -> list[Outcome]:
    """The base pool first, then each variant (pool fields overridden)."""
    base = dict(scenario.get("pool") or {})
    outcomes = [simulate(scenario, base, scenario.get("label", "as specified"))]
    for index, variant in enumerate(scenario.get("variants") or []):
        overrides = {k: v for k, v in variant.items() if k != "label"}
        label = variant.get("label") or ", ".join(f"{k}={v}" for k, v in overrides.items())
        outcomes.append(simulate(scenario, {**base, **overrides}, label or f"variant {index}"))
    return outcomes
