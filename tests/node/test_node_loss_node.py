"""A node dies and the pool heals, on the two-node tier (`NODE_COUNT = 2`).

A pool of four (warm buffer 2, maxReplicas 4) runs `jmp run` on both nodes (two on each,
placed by cordoning one node while the other fills), under the
cluster-wide reconciler (the install that reads Nodes: docs/concepts.md "Lost nodes") and
Jumpstarter's released controller; one instance on the second node is leased with the
released client. The second node is killed as a crash kills a machine
(`NodeCluster.kill_node`). Kubernetes' node lifecycle settings are its defaults: the Node goes
Ready Unknown after its grace period, and the pool then replaces the idle instance it lost
on the live node, at its ceiling, keeps the leased one and says so (Warning NodeLost,
Degraded InstancesLost). Once the lease ends the leased one goes too. The node comes back:
the old Pods are cleaned away, none registers again, and nothing is duplicated. The
figures (the kill to Ready Unknown, to the replacement Registered, to the pool whole) are
recorded, never asserted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.jumpstarter import JumpstarterSupply
from pool.model.reasons import INSTANCES_LOST, NODE_LOST
from tests.kubeget import get_json
from tests.node.pool_support import Pool, fresh_pool
from tests.node.support import record_figure

OWN_NODE_CLUSTER = True
NODE_COUNT = 2
pytestmark = pytest.mark.timeout(900)

Obj = dict[str, Any]
LEASE = "lease-on-lost-node"
# Ready goes Unknown --node-monitor-grace-period (50 s) after the last heartbeat; a
# replacement then boots in seconds. Generous bounds, not targets.
LOST_WITHIN_S = 180.0


@pytest.fixture
def pool(node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Pool]:
    with fresh_pool(node_cluster, jumpstarters, tmp_path, namespaced=False) as running:
        yield running


def _node_of(pool: Pool) -> dict[str, str]:
    """Instance (the Pod's owner) -> the node its Pod runs on, for Pods not being deleted."""
    placed = {}
    for pod in pool.pods():
        owners = pod["metadata"].get("ownerReferences") or []
        if owners and not pod["metadata"].get("deletionTimestamp"):
            placed[owners[0]["name"]] = pod["spec"].get("nodeName", "")
    return placed


def _events(pool: Pool, reason: str) -> list[Obj]:
    items: list[Obj] = get_json(pool.cluster, "events", "-n", pool.namespace)["items"]
    return [e for e in items if e.get("reason") == reason]


def test_a_killed_node_s_share_is_replaced_on_the_live_node_and_its_leased_one_kept(
    pool: Pool,
) -> None:
    cluster = pool.cluster
    first, second = cluster.node_names
    # Two instances on each node, whatever the scheduler's scores: each half fills while
    # the other node is cordoned.
    for half, (open_, closed) in enumerate(((second, first), (first, second)), start=1):
        cluster.kubectl("uncordon", open_)
        cluster.kubectl("cordon", closed)
        pool.apply(minReplicas=2 * half, minAvailableReplicas=2, maxReplicas=4)
        pool.wait(
            f"{2 * half} instances Registered",
            lambda want=2 * half: len(pool.registered()) == want,
            timeout=240,
        )
    cluster.kubectl("uncordon", second)
    pool.wait_warm(4, timeout=120)
    placed = _node_of(pool)
    assert set(placed.values()) == {first, second}, placed  # both nodes run instances
    on_second = sorted(n for n, node in placed.items() if node == second)
    leased = on_second[0]
    assert pool.lease(LEASE, exporter=leased) == leased
    before = {e["metadata"]["name"]: e["metadata"]["uid"] for e in pool.exporters()}

    killed = time.monotonic()
    cluster.kill_node(second)
    lost_idle = [n for n in on_second if n != leased]

    def healed() -> bool:
        names = {e["metadata"]["name"] for e in pool.exporters()}
        replacements = names - set(before)
        fresh = pool.registered() & replacements
        return not (set(lost_idle) & names) and len(fresh) >= len(lost_idle)

    pool.wait("the lost idle instances replaced and removed", healed, timeout=LOST_WITHIN_S)
    replaced = time.monotonic()
    status = pool.status()
    degraded = pool.condition("Degraded")
    assert (degraded.get("status"), degraded.get("reason")) == ("True", INSTANCES_LOST), degraded
    assert f"{leased} on {second} serves lease {LEASE}" in degraded["message"]
    # The leased one is kept: its Exporter is there, still holding the lease.
    kept = next(e for e in pool.exporters() if e["metadata"]["name"] == leased)
    assert kept["metadata"]["uid"] == before[leased]
    assert not kept["metadata"].get("deletionTimestamp")
    # ...and its holder is told: one Warning naming the instance, the node and the lease.
    warnings = [e for e in _events(pool, NODE_LOST) if e.get("type") == "Warning"]
    assert len(warnings) == 1, warnings
    for word in (leased, second, LEASE):
        assert word in warnings[0]["message"], warnings[0]["message"]
    removed = [e for e in _events(pool, NODE_LOST) if e.get("type") == "Normal"]
    assert {n for n in lost_idle if any(n in e["message"] for e in removed)} == set(lost_idle)
    # The replacements run on the live node: the pool is at its ceiling, the lost one is
    # not counted under it.
    assert all(node == first for n, node in _node_of(pool).items() if n not in before)
    assert len(pool.exporters()) == 4 and status.get("podsUnknown", 0) >= 1
    whole = pool.wait_warm(3, timeout=120) + time.monotonic() - killed
    record_figure(
        f"node loss: kill -> lost idle instance replaced (Registered) and removed "
        f"{replaced - killed:.0f} s; kill -> the pool whole again (3 available, 1 leased "
        f"on the lost node) {whole:.0f} s"
    )

    # The lease ends: the leased instance goes too, and is replaced.
    pool.release(LEASE)
    pool.wait(
        f"{leased} removed after its lease",
        lambda: leased not in {e["metadata"]["name"] for e in pool.exporters()},
        timeout=120,
    )
    pool.wait("Degraded cleared", lambda: pool.condition("Degraded").get("status") == "False")

    # The node comes back: the lost instances' Pods are cleaned away, none of them
    # registers again, nothing is duplicated.
    returned = time.monotonic()
    cluster.return_node(second)
    gone = {leased, *lost_idle}
    pool.wait(
        "the lost instances' Pods gone",
        lambda: not any(
            (p["metadata"].get("ownerReferences") or [{}])[0].get("name") in gone
            for p in pool.pods()
        ),
        timeout=180,
    )
    record_figure(
        f"node loss: the node back -> the lost instances' Pods gone "
        f"{time.monotonic() - returned:.0f} s"
    )
    # Their Exporters are gone, so no exporter of theirs can register again.
    names = {e["metadata"]["name"] for e in pool.exporters()}
    assert not names & gone and len(names) == 4
