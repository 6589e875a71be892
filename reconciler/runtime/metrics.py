"""The reconciler's Prometheus metrics, under the names controller-runtime gives every Go
controller, so existing dashboards and alerts work unchanged, plus the pools' own.

- `workqueue_*{name,controller}`: depth, adds, retries, queue and work durations, the
  longest running processor and unfinished work (client-go's workqueue metrics);
- `controller_runtime_reconcile_total{controller,result}` (success, error, requeue_after),
  `controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_time_seconds`;
- `leader_election_master_status{name}`: 1 while this process holds the leader Lease;
- `virtualtarget_image_allow_list_enabled`: 1 if it checks images against an allow-list;
- `virtualtarget_reconciler_informer_relists_total` and `..._watch_restarts_total` by
  resource, `virtualtarget_reconciler_api_writes_total{verb,resource}`;
- per pool, by namespace and set: instances by bucket, desired instances, the warm-buffer
  shortfall, pending leases, whether the ceiling holds it back, and its instances of an
  earlier revision (a rollout's progress); for a pool with `warm-buffer: auto`, the buffer
  its demand asks for, its arrival rate and boot p95. A deleted set's series go with it.

Everything is read from the runtime's own state when Prometheus scrapes (the queue's
`stats()`, the informers' counters, the last plan of each set): nothing on the hot path
takes a Prometheus lock. No I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from pool.rules.buckets import Bucket
from pool.rules.planner import Plan
from reconciler.runtime.cache import Cache, ObjKey
from reconciler.runtime.kube import Kube
from reconciler.runtime.workqueue import WorkQueue
from scrape.histogram import Histogram
from scrape.settings import image_allow_list_gauge

__all__ = ["CONTROLLER", "RECONCILE_BUCKETS", "ReconcileStats", "ReconcilerMetrics"]

CONTROLLER = "exporterset"
# controller-runtime's buckets for controller_runtime_reconcile_time_seconds.
RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0,
    10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip
_POOL = ["namespace", "exporterset"]


@dataclass
class ReconcileStats:
    """Outcomes and durations of passes, written by the workers under one lock."""

    results: dict[str, int] = field(default_factory=dict)  # success | error | requeue_after
    time: Histogram = field(default_factory=lambda: Histogram(RECONCILE_BUCKETS))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, result: str, seconds: float) -> None:
        with self.lock:
            self.results[result] = self.results.get(result, 0) + 1
            self.time.observe(seconds)

    def snapshot(self) -> tuple[dict[str, int], Histogram]:
        with self.lock:
            return dict(self.results), self.time.copy()


@dataclass(eq=False)  # the registry keys collectors by identity
class ReconcilerMetrics(Collector):
    queue: WorkQueue[ObjKey]
    reconciles: ReconcileStats
    informers: Mapping[str, Cache]  # by resource plural
    kube: Kube
    plans: Callable[[], Iterable[tuple[ObjKey, Plan]]]  # the last plan of every set
    leading: Callable[[], bool]
    lease_name: str
    image_allow_list: bool  # an allow-list (or a digest requirement) is configured
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.registry.register(self)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        yield from self._workqueue()
        yield from self._reconciles()
        yield from self._runtime()
        yield from self._pools()
        yield from self._demand()
        yield image_allow_list_gauge(self.image_allow_list)

    def _workqueue(self) -> Iterator[Metric]:
        stats = self.queue.stats()
        labels, values = ["name", "controller"], [CONTROLLER, CONTROLLER]
        depth = GaugeMetricFamily(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            labels=[*labels, "priority"],
        )
        depth.add_metric([*values, ""], stats.depth)
        yield depth
        for name, help_text, count in (
            ("workqueue_adds", "Total number of adds handled by workqueue", stats.adds),
            ("workqueue_retries", "Total number of retries handled by workqueue", stats.retries),
        ):
            family = CounterMetricFamily(name, help_text, labels=labels)
            family.add_metric(values, count)
            yield family
        for name, help_text, histogram in (
            (
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                stats.queue_duration,
            ),
            (
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
                stats.work_duration,
            ),
        ):
            family_h = HistogramMetricFamily(name, help_text, labels=labels)
            family_h.add_metric(values, histogram.cumulative(), histogram.total)
            yield family_h
        running = [stats.now - since for since in stats.processing_since]
        for name, help_text, value in (
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been "
                "observed by work_duration. Large values indicate stuck threads.",
                sum(running),
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                max(running, default=0.0),
            ),
        ):
            gauge = GaugeMetricFamily(name, help_text, labels=labels)
            gauge.add_metric(values, value)
            yield gauge

    def _reconciles(self) -> Iterator[Metric]:
        results, time = self.reconciles.snapshot()
        total = CounterMetricFamily(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            labels=["controller", "result"],
        )
        for result in ("success", "error", "requeue", "requeue_after"):
            total.add_metric([CONTROLLER, result], results.get(result, 0))
        errors = CounterMetricFamily(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            labels=["controller"],
        )
        errors.add_metric([CONTROLLER], results.get("error", 0))
        seconds = HistogramMetricFamily(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            labels=["controller"],
        )
        seconds.add_metric([CONTROLLER], time.cumulative(), time.total)
        yield from (total, errors, seconds)

    def _runtime(self) -> Iterator[Metric]:
        leader = GaugeMetricFamily(
            "leader_election_master_status",
            "1 while this process is the leader of the named Lease, else 0.",
            labels=["name"],
        )
        leader.add_metric([self.lease_name], 1 if self.leading() else 0)
        yield leader
        relists = CounterMetricFamily(
            "virtualtarget_reconciler_informer_relists",
            "Full lists of a resource (start, and after a watch's version expired).",
            labels=["resource"],
        )
        restarts = CounterMetricFamily(
            "virtualtarget_reconciler_watch_restarts",
            "Watches started again after the previous one ended or failed.",
            labels=["resource"],
        )
        for resource, informer in sorted(self.informers.items()):
            relists.add_metric([resource], informer.relists)
            restarts.add_metric([resource], informer.watch_restarts)
        writes = CounterMetricFamily(
            "virtualtarget_reconciler_api_writes",
            "Writes sent to the apiserver, by verb and resource.",
            labels=["verb", "resource"],
        )
        for (verb, resource), count in sorted(dict(self.kube.writes).items()):
            writes.add_metric([verb, resource], count)
        yield from (relists, restarts, writes)

    def _pools(self) -> Iterator[Metric]:
        instances = GaugeMetricFamily(
            "virtualtarget_exporterset_instances",
            "Owned instances of a pool, by bucket (docs/design.md §4).",
            labels=[*_POOL, "bucket"],
        )
        desired = GaugeMetricFamily(
            "virtualtarget_exporterset_desired_instances",
            "Instances the pool should have now.",
            labels=_POOL,
        )
        shortfall = GaugeMetricFamily(
            "virtualtarget_exporterset_warm_buffer_shortfall",
            "Warm (available) instances the pool lacks: minAvailableReplicas - available.",
            labels=_POOL,
        )
        pending = GaugeMetricFamily(
            "virtualtarget_exporterset_pending_leases",
            "Leases that match the pool and have no exporter yet.",
            labels=_POOL,
        )
        ceiling = GaugeMetricFamily(
            "virtualtarget_exporterset_at_ceiling",
            "1 while maxReplicas holds the pool below what it wants.",
            labels=_POOL,
        )
        outdated = GaugeMetricFamily(
            "virtualtarget_exporterset_outdated_instances",
            "Instances of an earlier revision than the pool renders now (a rollout's work).",
            labels=_POOL,
        )
        for (namespace, name), plan in sorted(self.plans(), key=lambda item: item[0]):
            pool = [namespace, name]
            for bucket in Bucket:
                instances.add_metric([*pool, bucket.value], plan.buckets.get(bucket, 0))
            desired.add_metric(pool, plan.desired)
            shortfall.add_metric(pool, plan.warm_shortfall)
            pending.add_metric(pool, plan.pending_leases)
            ceiling.add_metric(pool, 1 if plan.at_ceiling else 0)
            outdated.add_metric(pool, len(plan.outdated))
        yield from (instances, desired, shortfall, pending, ceiling, outdated)

    def _demand(self) -> Iterator[Metric]:
        """Pools with `warm-buffer: auto`: the buffer their demand asks for, and why."""
        buffer = GaugeMetricFamily(
            "virtualtarget_exporterset_demand_warm_buffer",
            "The warm buffer a warm-buffer: auto pool keeps, sized from its demand.",
            labels=_POOL,
        )
        rate = GaugeMetricFamily(
            "virtualtarget_exporterset_demand_arrival_rate",
            "Lease arrivals per second the pool has learned (decaying average).",
            labels=_POOL,
        )
        boot = GaugeMetricFamily(
            "virtualtarget_exporterset_demand_boot_p95_seconds",
            "p95 of the pool's recent boots, creation to Registered (its estimate until one).",
            labels=_POOL,
        )
        for (namespace, name), plan in sorted(self.plans(), key=lambda item: item[0]):
            if plan.demand is not None:
                buffer.add_metric([namespace, name], plan.demand.buffer)
                rate.add_metric([namespace, name], plan.demand.rate)
                boot.add_metric([namespace, name], plan.demand.boot.total_seconds())
        yield from (buffer, rate, boot)
