"""A pool that keeps nothing running serves a real client: a WaitForFirstConsumer pool
at zero, on the single-node cluster, beside Jumpstarter's released 0.9.0 controller and
router.

Jumpstarter 0.9.0's lease controller ends at once a Lease that matches no enabled
Exporter. The pool keeps one standby Exporter (no Pod) carrying the template's labels, so
the Lease pends on it as Offline; the pool sees it pending and creates an instance, which
registers from inside its Pod and gets the Lease. The client (Jumpstarter 0.9.0's, its
Python API as `jmp shell` uses it) leases by the pool's labels, flashes the marker guest,
boots it and releases; the idle instance goes once the pool's scale-down cooldown has
passed, and the pool is back at zero running instances. Twice, each from zero.

The figures: the Lease's creation to its Ready condition (the Lease's own timestamps,
whole seconds) beside the instance's boot (its Pod's creation to its Exporter's
Registered), and
the request to the client holding the Lease (Jumpstarter's client polls every 5 s).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.jumpstarter import JumpstarterSupply
from pool.model.timefmt import parse_time
from tests.e2e.objects import get_json
from tests.node import test_pools_node as pools
from tests.node.guest_support import monotonic, run_client
from tests.node.pool_support import Pool, fresh_pool
from tests.node.sharing import TENTH_OF_A_CORE
from tests.node.support import record_figure

pytestmark = pytest.mark.timeout(900)


Obj = dict[str, Any]
COOLDOWN_S = 5  # short: the release to zero is waited for twice
SELECTOR = "pool=lazy"


@pytest.fixture
def lazy_pool(node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Pool]:
    """A WaitForFirstConsumer pool of at most one QEMU instance, nothing kept warm."""
    with fresh_pool(
        node_cluster,
        jumpstarters,
        tmp_path,
        name="lazy",
        parameters=pools.GUEST_PARAMETERS,
        # A tenth of a core: the module runs beside the first node worker's (sharing.BESIDE).
        class_spec={"bindingMode": "WaitForFirstConsumer", **TENTH_OF_A_CORE},
    ) as pool:
        pool.apply(
            drivers=pools.GUEST_DRIVERS,
            minReplicas=0,
            maxReplicas=1,
            minAvailableReplicas=0,
            recycleStrategy="InPlaceReuse",
            scaleDownCooldown=f"{COOLDOWN_S}s",
        )
        yield pool


def _condition(obj: Obj, kind: str) -> Obj:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def _standby_only(pool: Pool) -> bool:
    """No instance, and one Exporter that is not one: the standby."""
    every = get_json(pool.cluster, "exporters", "-n", pool.namespace)["items"]
    return not pool.exporters() and len(every) == 1 and not pool.running()


def _boot_s(pool: Pool, exporter: str) -> float:
    """The instance's boot: its Pod's creation (the standby becomes the instance when it
    gets its Pod) to its Exporter's Registered condition (the watch's first view of it
    Registered; both may be gone since)."""
    pods = [e for e in list(pool.history.pods) if e.name == exporter]
    assert pods, f"{exporter}'s Pod never seen"
    started = parse_time(pods[0].obj["metadata"]["creationTimestamp"])
    for event in list(pool.history.exporters):
        registered = _condition(event.obj, "Registered")
        if event.name == exporter and registered.get("status") == "True":
            return (parse_time(registered["lastTransitionTime"]) - started).total_seconds()
    raise AssertionError(f"{exporter} never seen Registered")


def test_a_client_leases_from_an_empty_wait_for_first_consumer_pool(
    lazy_pool: Pool, marker_guest: Path, tmp_path: Path
) -> None:
    pool = lazy_pool
    pool.wait("the standby alone", lambda: _standby_only(pool))
    config = pool.jumpstarter.client_config("tester")
    run = run_client(config, SELECTOR, marker_guest, 1, tmp_path)
    assert run.code == 0, f"{run.output}\n{pool.instance_logs()}"
    acquired = run.first("lease acquired")
    lease = get_json(pool.cluster, "leases.jumpstarter.dev", acquired["lease"],
                     "-n", pool.namespace)  # fmt: skip
    assert lease["status"]["exporterRef"]["name"] == acquired["exporter"]
    assert not _condition(lease, "Unsatisfiable"), lease["status"]  # never ended for want
    to_ready = pool.lease_ready_s(acquired["lease"])
    boot = _boot_s(pool, acquired["exporter"])
    held = run.at("lease acquired") - run.at("lease requested")
    released = monotonic(run.at("releasing"))
    pool.wait("back to zero running instances", lambda: _standby_only(pool), timeout=120)
    record_figure(
        f"WaitForFirstConsumer pool at zero: Lease created -> Ready "
        f"{to_ready:.0f} s (instance boot, Pod created -> Registered, {boot:.0f} s); request "
        f"-> client holding the Lease {held:.1f} s; release -> zero running instances "
        f"{time.monotonic() - released:.0f} s (cooldown {COOLDOWN_S} s)"
    )
    pool.wait(  # the set's status says so too, a pass later
        "the status at zero",
        lambda: pool.status().get("replicas", 0) == pool.status().get("podsRunning", 0) == 0,
    )
