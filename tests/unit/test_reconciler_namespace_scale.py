"""A pass costs its own pool, whatever its namespace holds: in one namespace (Jumpstarter's
controller serves one) of 200 and of 2,000 sets, one pass reads the same objects through
the caches and the claim index, and one set's or Lease's event wakes the same sets.
The work is counted (objects handed out by an instrumented cache), never timed."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.namespace import Visits, drain, populated, visits_of_pass, wakes
from pool.model.access import EXPORTERSETS, JUMPSTARTER_LEASES
from reconciler.runtime.controller import Controller

SMALL, LARGE = 200, 2_000
NS = "ns-0"


def _lease(name: str, board: str, exporter: str = "") -> dict[str, object]:
    lease: dict[str, object] = {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"board": board}}},
    }
    if exporter:
        lease["status"] = {"exporterRef": {"name": exporter}}
    return lease


def _with_leases(sets: int) -> Controller:
    """`sets` steady pools; every tenth has a pending Lease and one of its instances leased
    (so a pass reads Leases, and rivals for the claim rule, of its own)."""
    controller, _ = populated(sets)
    leases = controller.informers[JUMPSTARTER_LEASES]
    for name in (f"pool{number}" for number in range(0, sets, 10)):
        leases.apply("ADDED", _lease(f"pending-{name}", name))
        leases.apply("ADDED", _lease(f"held-{name}", name, f"{name}-0"))
    return controller


@pytest.fixture(scope="module")
def controllers() -> dict[int, Controller]:
    return {size: _with_leases(size) for size in (SMALL, LARGE)}


def test_one_pass_reads_the_same_objects_in_a_namespace_ten_times_larger(
    controllers: dict[int, Controller],
) -> None:
    visited: dict[int, Counter[str]] = {}
    for size, controller in controllers.items():
        visited[size] = visits_of_pass(controller, (NS, "pool100"))  # a set with Leases
    assert visited[LARGE] == visited[SMALL]
    assert sum(visited[LARGE].values()) < 50  # its 2 instances, 2 Pods, 2 Leases, 1 class...
    # A pass reads its Leases and its rivals through the indexes: its two Leases by their
    # selector, the held one again by its Exporter; pool100 alone matches them.
    assert visited[LARGE]["leases.derived_by_index"] == 3
    assert visited[LARGE]["claims.matching"] == 1  # pool100 alone matches its Lease


def test_a_set_or_a_lease_wakes_only_the_sets_it_concerns(
    controllers: dict[int, Controller],
) -> None:
    assert controllers.keys() == {SMALL, LARGE}
    for controller in controllers.values():
        # A new set wakes itself (no Lease matches it); a pending Lease the one pool it asks
        # for, in any namespace size.
        assert wakes(controller) == (1, 1)


def test_a_set_matching_a_pending_lease_wakes_the_sets_that_lease_matches(
    controllers: dict[int, Controller],
) -> None:
    controller = controllers[LARGE]
    visits = Visits(controller)
    visits.on = True
    controller.informers[JUMPSTARTER_LEASES].apply("ADDED", _lease("shared", "shared"))
    drain(controller)
    sets = controller.informers[EXPORTERSETS]
    for name in ("older", "newer"):
        sets.apply(
            "ADDED",
            {
                "metadata": {"name": name, "namespace": NS, "uid": f"set-{name}"},
                "spec": {
                    "virtualTargetClassName": "qemu",
                    "selector": {"matchLabels": {"board": "shared"}},
                    "template": {"metadata": {"labels": {"board": "shared"}}},
                },
            },
        )
    woken = set(drain(controller))
    # "newer" may change which set counts the shared Lease: both are woken, nobody else.
    assert woken == {(NS, "older"), (NS, "newer")}
    assert visits.total() < 20
