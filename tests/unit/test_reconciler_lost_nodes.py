"""Instances on a lost node (`pool.model.nodes`, `pool.rules.buckets` LOST), through the
real planner: an idle one is replaced and removed, a lost one never holds its own
replacement back under maxReplicas, and a leased one is kept and told."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from api.access import CLUSTER, NAMESPACED
from pool.model.access import ACCESS, NODES, PODS, allowed
from pool.model.actions import CreateExporter, RecordEvent, Remove
from pool.model.keys import NAME_LABEL
from pool.model.nodes import GONE, node_lost
from pool.model.reasons import INSTANCES_LOST, NODE_LOST
from pool.model.views import ExporterView, LeaseView, Observation, PodView
from pool.rendering.provisioners import provisioner
from pool.rules.buckets import Bucket
from pool.rules.planner import Plan, plan
from pool.rules.planreport import SetPlan, as_json, as_text
from reconciler.runtime.controller import Controller
from reconciler.runtime.observe import lost_nodes
from reconciler.runtime.scope import Scope
from tests.unit.test_reconciler_support import T0, klass, pool, ready

DEAD = "node-b"
LOST = {DEAD: "Ready Unknown since 2026-01-01T00:00:00Z: Kubelet stopped posting node status."}


def pod(exporter: ExporterView, node: str) -> PodView:
    return PodView(exporter.name, exporter.name, "Running", exporter.uid, f"p-{exporter.uid}",
                   created=T0, node=node)  # fmt: skip


def observe(
    placed: list[tuple[ExporterView, str]], lost: dict[str, str] | None = None, **kw: Any
) -> Observation:
    leases = kw.pop("leases", ())
    return Observation(
        pool=pool(**{"min_replicas": 4, "min_available": 2, "max_replicas": 4, **kw}),
        klass=klass(),
        exporters=tuple(e for e, _ in placed),
        pods=tuple(pod(e, node) for e, node in placed),
        leases=tuple(leases),
        lost_nodes=LOST if lost is None else lost,
    )


def of(result: Plan, kind: type) -> list[Any]:
    return [a for a in result.actions if isinstance(a, kind)]


def condition(result: Plan, kind: str) -> dict[str, Any]:
    return next(c for c in result.status["conditions"] if c["type"] == kind)  # type: ignore[attr-defined]


def four() -> list[tuple[ExporterView, str]]:
    """A pool of four at its ceiling, two instances on each node."""
    return [(ready(f"pool-{i}", uid=f"u{i}"), "node-a" if i < 2 else DEAD) for i in range(4)]


def test_a_node_is_lost_while_its_ready_condition_is_not_true() -> None:
    def node(status: str | None) -> dict[str, Any]:
        conditions = [] if status is None else [{"type": "Ready", "status": status}]
        return {"status": {"conditions": conditions}}

    assert node_lost(node("True")) == ""
    assert node_lost(node(None)) == ""  # not reporting yet: nothing runs there
    assert node_lost(node("Unknown")).startswith("Ready Unknown")
    assert node_lost(node("False")).startswith("Ready False")
    unreachable = node("Unknown")
    unreachable["status"]["conditions"][0] |= {
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "message": "Kubelet stopped posting node status.",
    }
    said = "Ready Unknown since 2026-01-01T00:00:00Z: Kubelet stopped posting node status."
    assert node_lost(unreachable) == said


def test_the_lost_share_is_replaced_at_the_ceiling_and_removed_unfenced() -> None:
    result = plan(observe(four()), T0)
    assert result.buckets[Bucket.LOST] == 2 and result.buckets[Bucket.AVAILABLE] == 2
    # At maxReplicas 4 with 4 owned, the two lost ones do not count: two replacements.
    assert len(of(result, CreateExporter)) == 2
    removed = of(result, Remove)
    assert sorted(r.name for r in removed) == ["pool-2", "pool-3"]
    assert all(not r.fence and r.event == NODE_LOST for r in removed)
    assert all(f"its node {DEAD} is lost (Ready Unknown" in r.why for r in removed)
    assert [p for r in removed for p in r.pods] == [("pool-2", "p-u2"), ("pool-3", "p-u3")]
    degraded = condition(result, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", INSTANCES_LOST)
    assert degraded["message"] == f"2 instance(s) on lost node(s) {DEAD}; 2 idle, replaced"
    assert not result.at_ceiling


def test_the_same_pool_with_its_node_back_is_left_alone() -> None:
    result = plan(observe(four(), lost={}), T0)
    assert result.buckets[Bucket.LOST] == 0 and result.buckets[Bucket.AVAILABLE] == 4
    assert not of(result, CreateExporter) and not of(result, Remove)
    assert condition(result, "Degraded")["status"] == "False"


def test_a_leased_instance_on_a_lost_node_is_kept_told_and_shown() -> None:
    placed = four()
    leased = LeaseView("lab-7", {}, exporter="pool-3")
    result = plan(observe(placed, leases=[leased]), T0)
    assert result.buckets[Bucket.LOST] == 1 and result.buckets[Bucket.BUSY] == 1
    assert [r.name for r in of(result, Remove)] == ["pool-2"]  # never pool-3
    assert result.stranded == (("pool-3", DEAD, "lab-7"),)
    (warning,) = [e for e in of(result, RecordEvent) if e.reason == NODE_LOST]
    assert warning.warning
    assert warning.note == (
        f"instance pool-3 is on lost node {DEAD} ({LOST[DEAD]}); it serves lease lab-7: "
        "kept until the lease ends"
    )
    message = condition(result, "Degraded")["message"]
    assert "pool-3 on node-b serves lease lab-7, kept until the lease ends" in message
    # The Warning is told once: the next pass, with the condition written, says nothing new.
    told = pool(min_replicas=4, min_available=2, max_replicas=4, status=result.status)
    again = plan(replace(observe(placed, leases=[leased]), pool=told), T0)
    assert not [e for e in of(again, RecordEvent) if e.reason == NODE_LOST]
    # `virtualtarget plan` shows it, in text and in JSON.
    entry = SetPlan("ns", "pool", "qemu", result)
    text = as_text([entry], "namespace ns")
    assert "lost 1" in text
    assert f"pool-3 on node {DEAD} serves lease lab-7: kept until the lease ends" in text
    assert '"lostLeased"' in as_json([entry], T0, "qemu.jumpstarter.dev")


def test_a_lease_hook_the_lost_exporter_reported_holds_nothing_once_the_lease_ended() -> None:
    placed = four()
    stuck = ready("pool-3", uid="u3", exporter_status="LeaseReady", served_lease="lab-7")
    placed[3] = (stuck, DEAD)
    ended = LeaseView("lab-7", {}, exporter="pool-3", ended=True)
    result = plan(observe(placed, leases=[ended]), T0)
    assert result.buckets[Bucket.LOST] == 2 and result.stranded == ()
    assert sorted(r.name for r in of(result, Remove)) == ["pool-2", "pool-3"]


def test_pods_the_apiserver_still_calls_running_count_as_unknown_on_a_lost_node() -> None:
    status = plan(observe(four()), T0).status
    assert (status["podsRunning"], status["podsUnknown"], status["readyReplicas"]) == (2, 2, 2)


def test_a_gone_node_counts_as_lost() -> None:
    result = plan(observe(four(), lost={DEAD: GONE}), T0)
    assert result.buckets[Bucket.LOST] == 2
    assert all(GONE in r.why for r in of(result, Remove))


# -- the runtime's side: Nodes read where the install may, and the pools they concern woken


def _controller(scope: Scope) -> Controller:
    from bench.reconciler import CountingKube

    return Controller(CountingKube(), provisioner("qemu.jumpstarter.dev"), scope=scope)  # type: ignore[arg-type]


def _node(name: str, ready: str, heartbeat: str = "") -> dict[str, Any]:
    condition = {"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat}
    return {"metadata": {"name": name}, "status": {"conditions": [condition]}}


def _pod(name: str, node: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "lab", "uid": f"p-{name}", "labels": {NAME_LABEL: "pool"}}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def test_a_cluster_wide_reconciler_reads_nodes_and_wakes_the_pools_on_one_lost() -> None:
    controller = _controller(Scope())
    nodes, pods = controller.watches[NODES], controller.watches[PODS]
    nodes.replace([_node("node-a", "True"), _node(DEAD, "True")])
    nodes.synced.set()  # as its first list does: a node missing from it is gone
    pods.replace([_pod("pool-0", "node-a"), _pod("pool-1", DEAD)])
    views = tuple(controller.watches[PODS].derived_by_index("set", ("lab", "pool")))
    assert {v.node for v in views} == {"node-a", DEAD}
    assert lost_nodes(controller.watches.get(NODES), views) == {}
    drained = len(controller.queue)
    nodes.apply("MODIFIED", _node(DEAD, "True", heartbeat="later"))  # a heartbeat: no pass
    assert len(controller.queue) == drained
    nodes.apply("MODIFIED", _node(DEAD, "Unknown"))
    assert controller.queue.get(timeout=0) == ("lab", "pool")
    assert lost_nodes(controller.watches.get(NODES), views) == {DEAD: "Ready Unknown"}
    nodes.apply("DELETED", _node(DEAD, "Unknown"))
    assert lost_nodes(controller.watches.get(NODES), views) == {DEAD: GONE}
    assert any("watch" in r.verbs for r in _cluster_rules())


def test_a_namespaced_reconciler_reads_no_nodes() -> None:
    controller = _controller(Scope(("lab",)))
    assert NODES not in controller.watches and NODES not in controller.informers
    assert (
        lost_nodes(controller.watches.get(NODES), (PodView("p", "e", "Running", node=DEAD),)) == {}
    )
    assert not allowed(NODES, "list", mode=NAMESPACED)


def _cluster_rules() -> list[Any]:
    return [p for p in ACCESS if p.resource == "nodes" and p.applies(CLUSTER)]
