"""The reconciler's metrics under controller-runtime's names, its liveness and readiness
inputs, and the write guard of a leader that has not renewed in time."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from api.warmbuffer import WarmBufferSettings
from pool.model.access import EXPORTERS, EXPORTERSETS
from pool.model.views import LeaseView, Observation
from pool.rules.planner import plan
from reconciler.runtime.cache import Informer
from reconciler.runtime.kube import Kube, NotLeading
from reconciler.runtime.leader import ElectionConfig, Elector
from reconciler.runtime.metrics import ReconcilerMetrics, ReconcileStats
from reconciler.runtime.workqueue import WorkQueue
from scrape.settings import IMAGE_ALLOW_LIST_METRIC
from tests.unit.test_reconciler_support import T0, klass, pool, ready

CONTROLLER_RUNTIME_NAMES = {
    "workqueue_depth",
    "workqueue_adds",
    "workqueue_retries",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_longest_running_processor_seconds",
    "workqueue_unfinished_work_seconds",
    "controller_runtime_reconcile",
    "controller_runtime_reconcile_errors",
    "controller_runtime_reconcile_time_seconds",
    "leader_election_master_status",
}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def scrape(metrics: ReconcilerMetrics) -> dict[str, Any]:
    text = metrics.exposition().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(families: dict[str, Any], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in families[name].samples
        if s.name in (name, f"{name}_total")
    }


def metrics_with(
    plans: list[Any], queue: WorkQueue[Any] | None = None, image_allow_list: bool = False
) -> ReconcilerMetrics:
    kube = Kube(ApiClient())
    kube.writes[("create", "exporters")] = 3
    informer = Informer(kube, EXPORTERS)
    informer.relists, informer.watch_restarts = 2, 5
    return ReconcilerMetrics(
        queue=queue if queue is not None else WorkQueue(),
        reconciles=ReconcileStats(),
        informers={"exporters": informer},
        kube=kube,
        plans=lambda: plans,
        leading=lambda: True,
        lease_name="exporterset-reconciler",
        image_allow_list=image_allow_list,
    )


def test_controller_runtime_names_and_labels_are_scraped() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add("b")
    clock.t += 2
    assert queue.get(timeout=0) == "a"
    clock.t += 0.5
    queue.done("a")
    queue.add_rate_limited("a")
    assert queue.get(timeout=0) == "b"  # still in work at the scrape
    clock.t += 4
    metrics = metrics_with([], queue)
    metrics.reconciles.record("success", 0.02)
    metrics.reconciles.record("error", 0.3)
    families = scrape(metrics)
    assert set(families) >= CONTROLLER_RUNTIME_NAMES
    queue_labels = (("controller", "exporterset"), ("name", "exporterset"))
    assert samples(families, "workqueue_adds")[queue_labels] == 2
    assert samples(families, "workqueue_retries")[queue_labels] == 1
    assert samples(families, "workqueue_depth")[(*queue_labels, ("priority", ""))] == 0
    assert samples(families, "workqueue_longest_running_processor_seconds")[queue_labels] == 4
    assert samples(families, "workqueue_unfinished_work_seconds")[queue_labels] == 4
    work = {
        s.labels.get("le"): s.value for s in families["workqueue_work_duration_seconds"].samples
    }
    assert work["1.0"] == 1 and work["0.1"] == 0  # a's 0.5 s
    results = samples(families, "controller_runtime_reconcile")
    assert results[(("controller", "exporterset"), ("result", "success"))] == 1
    assert results[(("controller", "exporterset"), ("result", "error"))] == 1
    assert (
        samples(families, "controller_runtime_reconcile_errors")[(("controller", "exporterset"),)]
        == 1
    )
    leader = samples(families, "leader_election_master_status")
    assert leader == {(("name", "exporterset-reconciler"),): 1}
    assert (
        samples(families, "virtualtarget_reconciler_api_writes")[
            (("resource", "exporters"), ("verb", "create"))
        ]
        == 3
    )
    assert (
        samples(families, "virtualtarget_reconciler_informer_relists")[(("resource", "exporters"),)]
        == 2
    )
    assert (
        samples(families, "virtualtarget_reconciler_watch_restarts")[(("resource", "exporters"),)]
        == 5
    )


def test_pool_series_by_namespace_and_set_and_gone_with_the_set() -> None:
    short = plan(
        Observation(pool=pool(min_available=3), klass=klass(), exporters=(ready("pool-0"),)),
        T0,
    )
    plans = [(("ns", "pool"), short)]
    families = scrape(metrics_with(plans))
    pool_labels = (("exporterset", "pool"), ("namespace", "ns"))
    assert samples(families, "virtualtarget_exporterset_warm_buffer_shortfall") == {pool_labels: 2}
    assert samples(families, "virtualtarget_exporterset_desired_instances") == {pool_labels: 3}
    assert samples(families, "virtualtarget_exporterset_pending_leases") == {pool_labels: 0}
    assert samples(families, "virtualtarget_exporterset_at_ceiling") == {pool_labels: 0}
    assert samples(families, "virtualtarget_exporterset_outdated_instances") == {pool_labels: 0}
    rolling = plan(
        Observation(
            pool=pool(min_available=1, revision="new"),
            klass=klass(),
            exporters=(ready("pool-0", revision="old."), ready("pool-1", revision="old.")),
        ),
        T0,
    )
    rolled = scrape(metrics_with([(("ns", "pool"), rolling)]))
    assert samples(rolled, "virtualtarget_exporterset_outdated_instances") == {pool_labels: 2}
    buckets = samples(families, "virtualtarget_exporterset_instances")
    assert buckets[(("bucket", "available"), *pool_labels)] == 1
    assert buckets[(("bucket", "busy"), *pool_labels)] == 0
    plans.clear()  # the set was deleted: the runtime drops its last plan
    assert samples(scrape(metrics_with(plans)), "virtualtarget_exporterset_desired_instances") == {}


def test_a_watch_loop_that_stopped_hearing_from_the_apiserver_is_stalled() -> None:
    informer = Informer(Kube(ApiClient()), EXPORTERSETS)
    assert informer.stalled_for() == float("inf")  # not running
    informer.running = True
    informer.last_contact = time.monotonic() - 400
    assert 399 < informer.stalled_for() < 500


def test_a_leader_past_its_renew_deadline_sends_no_write() -> None:
    kube = Kube(ApiClient())  # no server: a write that got past the guard would fail loudly
    elector = Elector(kube, ElectionConfig(namespace="ns", renew_deadline=10))
    kube.may_write = elector.may_write
    assert not elector.may_write()  # not leading yet
    elector.leading.set()
    elector._renewed_at = time.monotonic() - 11  # renewed 11 s ago, as after a pause
    with pytest.raises(NotLeading):
        kube.create(EXPORTERS, "ns", {"metadata": {"name": "pool-0"}})
    assert kube.writes == {}
    elector._renewed_at = time.monotonic()
    assert elector.may_write()
    assert timedelta(seconds=elector.config.renew_deadline) < timedelta(
        seconds=elector.config.lease_duration
    )


@pytest.mark.parametrize("configured", [False, True])
def test_the_image_allow_list_setting_is_exposed(configured: bool) -> None:
    families = scrape(metrics_with([], image_allow_list=configured))
    assert samples(families, IMAGE_ALLOW_LIST_METRIC) == {(): float(configured)}


def test_demand_series_only_for_auto_pools() -> None:
    burst = tuple(
        LeaseView(f"l{i}", {"matchLabels": {"board": "qemu"}}, exporter=f"x{i}", created=T0)
        for i in range(10)
    )
    auto = WarmBufferSettings(auto=True, boot_estimate=timedelta(minutes=3))
    sized = plan(
        Observation(pool=pool(min_available=1, sizing=auto), klass=klass(), leases=burst),
        T0 + timedelta(seconds=30),
    )
    fixed = plan(Observation(pool=pool(name="fixed"), klass=klass()), T0)
    families = scrape(metrics_with([(("ns", "pool"), sized), (("ns", "fixed"), fixed)]))
    pool_labels = (("exporterset", "pool"), ("namespace", "ns"))
    assert sized.demand is not None
    buffer = samples(families, "virtualtarget_exporterset_demand_warm_buffer")
    assert buffer == {pool_labels: sized.demand.buffer}
    rate = samples(families, "virtualtarget_exporterset_demand_arrival_rate")
    assert rate[pool_labels] > 0 and len(rate) == 1
    boot = samples(families, "virtualtarget_exporterset_demand_boot_p95_seconds")
    assert boot == {pool_labels: 180.0}
