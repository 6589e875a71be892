"""One namespace of N pools, in process: what a pass costs, and what one set's event wakes.

Jumpstarter's controller serves one namespace, so a lab's pools all share one. Here the
real `Controller` runs on a counting client (no cluster), its caches filled through
`Informer.apply` with N steady pools of 2 ready instances each (Exporters, Pods, their
statuses converged by a first pass), all in one namespace, and for each N:
- passes: one `sync` of every set, the CPU-seconds per pass;
- visits: the cached objects one pass reads (every object a cache or the claim index
  hands it, counted by wrapping their readers), for one set; flat in N when a pass costs
  its own pool;
- wakes: the sets queued by the event of one new set and by one new pending Lease (each
  queued set is a pass the event costs);
then, for the largest N, a profile (cProfile) of one pass over every set: where its time
goes by stage (observe, rivals, Leases, plan, execute) and by function.

    python -m bench namespace 200 1000 2000
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.reconciler import filled_controller
from pool.model.access import EXPORTERSETS, JUMPSTARTER_LEASES
from reconciler.runtime.controller import Controller

__all__ = ["Visits", "drain", "main", "populated", "visits_of_pass", "wakes"]

DEFAULT_SIZES = (200, 1000, 2000)
PER_SET = 2
NAMESPACE = "ns-0"
# The functions a pass's time is reported by: (what, file, function) as cProfile names them.
STAGES = (
    ("the pass (Controller.sync)", "runtime/controller.py", "sync"),
    ("observe the set", "runtime/observe.py", "observe"),
    ("its rivals for the claim rule", "runtime/observe.py", "rivals"),
    ("its Leases", "runtime/observe.py", "leases"),
    ("its pool view", "runtime/observe.py", "pool_view"),
    ("its credentials", "runtime/credentials.py", "of"),
    ("its Pods", "runtime/observe.py", "pods"),
    ("plan (pool.rules.planner.plan)", "rules/planner.py", "plan"),
    ("execute (Executor.run)", "runtime/executor.py", "run"),
    ("leftover instances", "runtime/leftovers.py", "look_after"),
)


def populated(sets: int) -> tuple[Controller, list[tuple[str, str]]]:
    """A controller whose caches hold `sets` steady pools in one namespace, their statuses
    as a first pass wrote them; and the sets' keys."""
    controller, _ = filled_controller(sets, PER_SET, 1)
    cache = controller.informers[EXPORTERSETS]
    keys = sorted((s["metadata"]["namespace"], s["metadata"]["name"]) for s in cache.items())
    for key in keys:
        result = controller.sync(key)
        obj = cache.get(*key)
        if result is not None and obj is not None:
            cache.apply("MODIFIED", {**obj, "status": dict(result.status)})
    drain(controller)
    return controller, keys


class Visits:
    """Counts the objects the controller's caches (and claim index) hand out, by reader."""

    def __init__(self, controller: Controller) -> None:
        self.counts: Counter[str] = Counter()
        self.on = False
        for resource, cache in controller.watches.items():
            for reader in ("get", "by_index", "derived_by_index", "items"):
                self._wrap(cache, reader, f"{resource.plural}.{reader}")
        claims = getattr(controller, "claims", None)  # the claim index, where there is one
        if claims is not None:
            for reader in ("get", "matching", "selecting"):
                self._wrap(claims, reader, f"claims.{reader}")

    def _wrap(self, owner: Any, reader: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, reader)

        def counted(*args: Any, **kwargs: Any) -> Any:
            found = original(*args, **kwargs)
            if self.on:
                self.counts[label] += len(found) if isinstance(found, list) else int(bool(found))
            return found

        setattr(owner, reader, counted)

    def total(self) -> int:
        return sum(self.counts.values())


def visits_of_pass(controller: Controller, key: tuple[str, str]) -> Counter[str]:
    """The cached objects one pass over `key` reads, by reader."""
    visits = Visits(controller)
    visits.on = True
    controller.sync(key)
    visits.on = False
    return visits.counts


def drain(controller: Controller) -> list[tuple[str, str]]:
    """The keys queued now, taken off the queue (none passed)."""
    taken = []
    while (item := controller.queue.take(timeout=0)) is not None:
        taken.append(item[0])
        controller.queue.done(item[0])
    return taken


def wakes(controller: Controller) -> tuple[int, int]:
    """(sets queued by one new set's event, by one new pending Lease's) in the namespace."""
    drain(controller)
    controller.informers[EXPORTERSETS].apply(
        "ADDED",
        {
            "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
            "kind": "ExporterSet",
            "metadata": {"name": "newcomer", "namespace": NAMESPACE, "uid": "set-newcomer"},
            "spec": {
                "virtualTargetClassName": "qemu",
                "selector": {"matchLabels": {"board": "newcomer"}},
                "template": {"metadata": {"labels": {"board": "newcomer"}}},
            },
        },
    )
    by_set = len(set(drain(controller)))
    controller.informers[JUMPSTARTER_LEASES].apply(
        "ADDED",
        {
            "metadata": {"name": "asked", "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"board": "pool0"}}},
        },
    )
    by_lease = len(set(drain(controller)))
    return by_set, by_lease


def _pass_seconds(controller: Controller, keys: list[tuple[str, str]]) -> float:
    started = time.process_time()
    for key in keys:
        controller.sync(key)
    return (time.process_time() - started) / len(keys)


def _profile(controller: Controller, keys: list[tuple[str, str]]) -> list[str]:
    profiler = cProfile.Profile()
    profiler.enable()
    for key in keys:
        controller.sync(key)
    profiler.disable()
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    # (file, function) -> (own seconds, cumulative seconds)
    rows: dict[tuple[str, str], tuple[float, float]] = {}
    for (path, _, function), (_, _, own, cumulative, _) in raw.items():
        where = ("/".join(path.split("/")[-2:]), function)
        had = rows.get(where, (0.0, 0.0))
        rows[where] = (had[0] + own, had[1] + cumulative)
    per_pass = 1000 / len(keys)
    sync = rows.get(("runtime/controller.py", "sync"), (0.0, 1.0))[1]
    lines = [
        "",
        f"Profile of one pass over each of {len(keys):,} sets (cProfile, its overhead "
        "included): cumulative ms per pass by stage:",
        "",
        "| stage | ms per pass | share of the pass |",
        "| --- | ---: | ---: |",
    ]
    for label, path, function in STAGES:
        cumulative = rows.get((path, function), (0.0, 0.0))[1]
        if cumulative:
            lines.append(f"| {label} | {cumulative * per_pass:.3f} | {cumulative / sync:.0%} |")
    lines += [
        "",
        "The functions with the most time of their own:",
        "",
        "| function | own ms per pass | cumulative ms per pass |",
        "| --- | ---: | ---: |",
    ]
    for (path, function), (own, cumulative) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:12]:
        lines.append(
            f"| `{path}:{function}` | {own * per_pass:.3f} | {cumulative * per_pass:.3f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> str:
    sizes = [int(a) for a in argv] if argv else list(DEFAULT_SIZES)
    lines = [
        f"## namespace (`python -m bench namespace {' '.join(map(str, sizes))}`): N pools "
        f"of {PER_SET} in one namespace, one pass each",
        "",
        "| sets | CPU ms per pass | objects visited by one pass | sets woken by a new set "
        "| by a new pending Lease |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    controller: Controller | None = None
    keys: list[tuple[str, str]] = []
    for size in sizes:
        controller, keys = populated(size)
        per_pass = _pass_seconds(controller, keys)
        visited = sum(visits_of_pass(controller, keys[len(keys) // 2]).values())
        by_set, by_lease = wakes(controller)
        lines.append(
            f"| {size:,} | {per_pass * 1000:.2f} | {visited:,} | {by_set:,} | {by_lease:,} |"
        )
    if controller is not None:
        lines += _profile(controller, keys)
    return "\n".join(lines) + "\n"
