"""A Lease wakes only the pools it concerns, in the refill lane, and a refill pass only
creates; credentials just issued put the pool in the Pods lane, below refills.

With many pools in a namespace, a Lease event used to wake every one of them, and the pass
that creates a replacement waited behind passes that only brought Pods, Secrets and status
up to date. These pin the routing and the two-step pass (bench/RESULTS.md, refill).
"""

from __future__ import annotations

from typing import Any

from bench.reconciler import CountingKube, _controller, exporter, exporter_set
from pool.model.access import EVENTS, EXPORTERS, EXPORTERSETS, JUMPSTARTER_LEASES
from pool.model.actions import CreateExporter
from pool.model.views import LeaseView
from reconciler.runtime.controller import Controller, Lane
from tests.unit.test_reconciler_planner import of, run
from tests.unit.test_reconciler_support import booting, ready


def two_pools() -> tuple[Controller, CountingKube]:
    controller, kube = _controller(1)
    sets = controller.informers[EXPORTERSETS]
    for name in ("a", "b"):
        sets.apply("ADDED", exporter_set("ns-0", name, warm=1))
    controller.informers[EXPORTERS].apply(
        "ADDED", exporter("ns-0", "b", "set-ns-0-b", 0, "available")
    )
    drain(controller)
    return controller, kube


def drain(controller: Controller) -> list[tuple[tuple[str, str], int]]:
    taken = []
    while (item := controller.queue.take(timeout=0)) is not None:
        taken.append(item)
        controller.queue.done(item[0])
    return taken


def lease(name: str, selector: dict[str, Any], exporter_name: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns-0"},
        "spec": {"selector": selector},
    }
    if exporter_name:
        obj["status"] = {"exporterRef": {"name": exporter_name}}
    return obj


def test_a_pending_lease_wakes_the_pools_its_selector_matches() -> None:
    controller, _ = two_pools()
    leases = controller.informers[JUMPSTARTER_LEASES]
    leases.apply("ADDED", lease("l1", {"matchLabels": {"board": "a"}}))
    assert drain(controller) == [(("ns-0", "a"), Lane.REFILL)]
    leases.apply("ADDED", lease("l2", {}))  # an empty selector matches every pool
    assert sorted(drain(controller)) == [(("ns-0", "a"), Lane.REFILL), (("ns-0", "b"), Lane.REFILL)]


def test_an_assigned_lease_wakes_the_pool_owning_its_exporter() -> None:
    controller, _ = two_pools()
    leases = controller.informers[JUMPSTARTER_LEASES]
    leases.apply("ADDED", lease("l1", {"matchLabels": {"other": "x"}}, "b-0"))
    assert drain(controller) == [(("ns-0", "b"), Lane.REFILL)]


def test_a_refill_pass_only_creates_and_the_rest_follows_in_turn() -> None:
    controller, kube = _controller(1)
    controller.informers[EXPORTERSETS].apply("ADDED", exporter_set("ns-0", "a", warm=2))
    key = ("ns-0", "a")
    result = controller.sync(key, Lane.REFILL)
    assert result is not None
    assert [r for r, _ in kube.created] == [EXPORTERS, EVENTS, EXPORTERS, EVENTS]
    assert kube.calls == 4  # no status patch yet
    full = controller.sync(key)
    assert full is not None and kube.calls > 4  # the ordinary pass writes the status


def test_a_lease_an_exporter_already_serves_is_not_also_pending() -> None:
    # The Exporter's leaseRef reached the cache before the Lease's exporterRef did.
    lease_view = LeaseView("l1", {"matchLabels": {"board": "qemu"}})
    exporters = [ready("pool-0", lease_ref="l1"), ready("pool-1"), booting("pool-2")]
    result = run(exporters, min_available=2, leases=[lease_view])
    assert result.pending_leases == 0
    assert of(result, CreateExporter) == []  # busy 1 + warm 2 = 3, all there


def test_credentials_just_issued_put_the_pool_in_the_pods_lane_below_refills() -> None:
    controller, _ = _controller(1)
    sets, exporters = controller.informers[EXPORTERSETS], controller.informers[EXPORTERS]
    set_obj = exporter_set("ns-0", "a", warm=1)
    sets.apply("ADDED", set_obj)
    waiting = exporter("ns-0", "a", set_obj["metadata"]["uid"], 0, "available")
    exporters.apply("ADDED", waiting)
    drain(controller)
    issued = {**waiting, "status": {**waiting["status"], "credential": {"name": "a-0-token"}}}
    exporters.apply("MODIFIED", issued)
    assert drain(controller) == [(("ns-0", "a"), Lane.PODS)]
    exporters.apply("MODIFIED", issued)  # still issued: nothing new to hurry
    assert drain(controller) == [(("ns-0", "a"), Lane.ORDINARY)]
    controller.queue.add(("ns-0", "b"), Lane.PODS)
    controller.queue.add(("ns-0", "c"), Lane.REFILL)
    assert [key for key, _ in drain(controller)] == [("ns-0", "c"), ("ns-0", "b")]
