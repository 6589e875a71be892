"""Two nodes in the node tier: both Ready, their Pods reach each other, the Services and the
node IP where Jumpstarter's relays listen. Then a node dies under a pool and the pool heals.

A pool of four (warm buffer 2, maxReplicas 4) runs `jmp run` on both nodes (two on each,
placed by cordoning one node while the other fills), under the cluster-wide reconciler
(the install that reads Nodes: docs/concepts.md "Lost nodes") and Jumpstarter's released
controller; one instance on the second node is leased with the released client. The second
node is killed as a crash kills a machine (`NodeCluster.kill_node`): its processes and its
Pods' are gone, it answers nothing, and its Node goes Ready Unknown and gets the
unreachable taint after Kubernetes' default grace period. The pool replaces the idle
instances it lost on the live node, at its ceiling, keeps the leased one and says so
(Warning NodeLost, Degraded InstancesLost); once the lease ends the leased one goes too.
The node comes back Ready, untainted: the old Pods are cleaned away, none registers again,
and nothing is duplicated. Last, the node killed again before the stop, which leaves
nothing on the host.

One kill serves both the node's and the pool's checks: each waits out the same grace
period. The node lifecycle settings are Kubernetes' defaults; the figures (the kill to
Ready Unknown and to the taint by the objects' times, to the replacement Registered, to the
pool whole) are recorded, never asserted."""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import ipaddress
import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import free_port
from harness.jumpstarter import JumpstarterSupply
from harness.kubeget import get_json
from harness.node import NodeCluster, NodeError
from harness.nodehost import cgroup_pids, processes_of
from pool.model.reasons import INSTANCES_LOST, NODE_LOST
from tests.node.hoststate import assert_clean, host_state
from tests.node.pool_support import Pool, fresh_pool
from tests.node.support import (
    apply,
    busybox_pod,
    get,
    record_figure,
    wait_for_phase,
)

OWN_NODE_CLUSTER = True
NODE_COUNT = 2
pytestmark = pytest.mark.timeout(900)
Obj = dict[str, Any]
UNREACHABLE = "node.kubernetes.io/unreachable"
# Kubernetes 1.36's defaults: Ready goes Unknown --node-monitor-grace-period (50 s) after
# the last heartbeat, looked at every --node-monitor-period (5 s); a replacement then boots
# in seconds. Generous bounds, not targets.
LOST_WITHIN_S = 120.0
HEALED_WITHIN_S = 180.0
LEASE = "lease-on-lost-node"


@pytest.fixture(scope="module")
def host_before(shared_node_cluster: Any) -> dict[str, Any]:
    """The machine before this module's cluster starts (the shared one stopped first)."""
    shared_node_cluster.stop()
    return host_state()


@pytest.fixture(scope="module")
def cluster(host_before: dict[str, Any], node_cluster: NodeCluster) -> NodeCluster:
    return node_cluster


@pytest.fixture(scope="module")
def relay(cluster: NodeCluster) -> Iterator[tuple[str, int]]:
    """An HTTP server on the first node's IP, where the tests run Jumpstarter's relays."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"node-ip-ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    address = (cluster.network.node_ip, free_port(cluster.network.node_ip))
    server = http.server.ThreadingHTTPServer(address, Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield address
    server.shutdown()
    server.server_close()


def _pinned(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """Pinned through the scheduler (not spec.nodeName): it must see both nodes."""
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def _server(cluster: NodeCluster, name: str, node: str) -> dict[str, Any]:
    return _pinned(
        busybox_pod(
            cluster,
            name,
            f"mkdir -p /www && echo {name}-ok > /www/index.html && exec httpd -f -p 8080 -h /www",
            container={"readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}},
        ),
        node,
    )


def _service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


def _node(cluster: NodeCluster, name: str) -> dict[str, Any]:
    found: dict[str, Any] = get_json(cluster, "node", name)
    return found


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def _stamp(value: str) -> float:
    """An object's timestamp (RFC 3339, whole seconds, UTC) as `time.time()` counts."""
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def test_both_nodes_are_ready_each_on_its_own_address(cluster: NodeCluster) -> None:
    assert len(cluster.nodes) == 2
    for node in cluster.nodes:
        found = _node(cluster, node.name)
        assert _ready(found)["status"] == "True", found["status"]["conditions"]
        addresses = {a["type"]: a["address"] for a in found["status"]["addresses"]}
        assert addresses["InternalIP"] == node.network.node_ip
    with pytest.raises(NodeError, match="control plane"):  # its IP is the apiserver's
        cluster.kill_node(cluster.node_name)


def test_pods_on_both_nodes_reach_each_other_the_services_and_the_node_ip(
    cluster: NodeCluster, relay: tuple[str, int]
) -> None:
    first, second = cluster.node_names
    apply(
        cluster,
        "default",
        _server(cluster, "web-1", first),
        _server(cluster, "web-2", second),
        _service("web-1"),
        _service("web-2"),
    )
    for name in ("web-1", "web-2"):
        cluster.kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=120s",
                        timeout=130)  # fmt: skip
    pods = {name: get(cluster, "default", "pod", name) for name in ("web-1", "web-2")}
    assert pods["web-1"]["spec"]["nodeName"] == first
    assert pods["web-2"]["spec"]["nodeName"] == second
    for pod, node in zip(pods.values(), cluster.nodes, strict=True):
        # Kubernetes' DefaultTolerationSeconds: 300 s on an unreachable or not-ready node.
        tolerations = {t["key"]: t.get("tolerationSeconds") for t in pod["spec"]["tolerations"]}
        assert tolerations[UNREACHABLE] == 300, tolerations
        pod_ip = ipaddress.ip_address(pod["status"]["podIP"])
        assert pod_ip in ipaddress.ip_network(node.network.pod_cidr)  # its node's own range
        assert Path(f"/sys/class/net/{node.network.bridge}").exists()  # its node's bridge
    # From each node: the other node's Pod, the Service in front of it, the first node's
    # IP, and kube-apiserver through the `kubernetes` Service (plain HTTP to its TLS port:
    # Go's server answers that it wants HTTPS). kube-proxy syncs a new Service's rules
    # shortly after it is made: each is tried a while.
    apiserver = (
        "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | "
        f"timeout 3 nc {cluster.network.kubernetes_service_ip} 443"
    )
    targets = {
        first: ("web-2", pods["web-2"]["status"]["podIP"]),
        second: ("web-1", pods["web-1"]["status"]["podIP"]),
    }
    for on, (other, ip) in targets.items():
        service = get(cluster, "default", "service", other)["spec"]["clusterIP"]
        urls = [f"http://{ip}:8080/", f"http://{service}/", f"http://{relay[0]}:{relay[1]}/"]
        fetch = " && ".join(
            f"(for i in $(seq 40); do {command} && exit 0; sleep 0.5; done; exit 1)"
            for command in [*(f"timeout 3 wget -qO- {url}" for url in urls), apiserver]
        )
        client = f"client-on-{on}"
        apply(cluster, "default", _pinned(busybox_pod(cluster, client, fetch), on))
        pod = wait_for_phase(cluster, "default", client, ("Succeeded", "Failed"))
        log = cluster.kubectl("logs", client).stdout
        assert pod["status"]["phase"] == "Succeeded", (pod["status"], log)
        assert pod["spec"]["nodeName"] == on
        assert log.startswith(f"{other}-ok\n{other}-ok\nnode-ip-ok\n"), log
        assert "Client sent an HTTP request to an HTTPS server" in log, log


def _task_processes(cluster: NodeCluster, name: str) -> dict[int, bytes]:
    """The node's containers' processes (pid -> command line), as its containerd lists
    them, and everything in its Pods' cgroups."""
    node = cluster.node(name)
    pids = set(cgroup_pids([node.network.cgroup]))
    tasks = subprocess.run([*node.ctr, "tasks", "ls"], capture_output=True, text=True, check=True)
    pids |= {int(line.split()[1]) for line in tasks.stdout.splitlines()[1:] if line.split()}
    return _command_lines(pids)


def _command_lines(pids: Iterable[int]) -> dict[int, bytes]:
    """pid -> command line of those of `pids` that run (a zombie's is empty)."""
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
    return {pid: line for pid, line in found.items() if line}


def _still_running(processes: dict[int, bytes]) -> dict[int, bytes]:
    """Those of `processes` still running (the same pid with the same command line)."""
    now = _command_lines(processes)
    return {pid: line for pid, line in now.items() if line == processes[pid]}


def _wait_for_node(
    cluster: NodeCluster,
    name: str,
    done: Callable[[dict[str, Any]], bool],
    timeout: float = LOST_WITHIN_S,
) -> tuple[float, dict[str, Any]]:
    """Poll the Node until `done(node)`; when it was first seen so, and the Node."""
    deadline = time.monotonic() + timeout
    while True:
        node = _node(cluster, name)
        if done(node):
            return time.time(), node
        if time.monotonic() > deadline:
            raise AssertionError(f"node {name} after {timeout:.0f}s: {json.dumps(node['status'])}")
        time.sleep(0.5)


def _unreachable(node: dict[str, Any]) -> dict[str, Any] | None:
    taints = node["spec"].get("taints", [])
    return next((t for t in taints if t["key"] == UNREACHABLE and t["effect"] == "NoExecute"), None)


@pytest.fixture
def pool(cluster: NodeCluster, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Pool]:
    with fresh_pool(cluster, jumpstarters, tmp_path, namespaced=False) as running:
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


def _fill_both_nodes(pool: Pool) -> None:
    """Two instances on each node, whatever the scheduler's scores: each half fills while
    the other node is cordoned."""
    cluster = pool.cluster
    first, second = cluster.node_names
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


def _assert_dead(cluster: NodeCluster, name: str, processes: dict[int, bytes], pod: Obj) -> None:
    """Nothing of the node is left running (kubelet, containerd, shims, the Pods'
    processes), and nothing of it answers: a Pod's address and its kubelet stay silent."""
    node = cluster.node(name)
    assert processes_of(node.workdir) == {}
    assert _still_running(processes) == {}
    assert cgroup_pids([node.network.cgroup]) == set()
    for address in ((pod["status"]["podIP"], 8080), (node.network.node_ip, node.ports["kubelet"])):
        with pytest.raises(OSError):
            socket.create_connection(address, timeout=3).close()


def _wait_unknown_and_tainted(cluster: NodeCluster, name: str, killed_at: float) -> None:
    """The Node goes Ready Unknown and gets the unreachable NoExecute taint; the figures
    by the objects' own times and by when they were seen."""
    seen_unknown, found = _wait_for_node(cluster, name, lambda n: _ready(n)["status"] == "Unknown")
    unknown_at = _stamp(_ready(found)["lastTransitionTime"])
    seen_tainted, found = _wait_for_node(cluster, name, lambda n: _unreachable(n) is not None)
    taint = _unreachable(found)
    assert taint is not None
    tainted_at = _stamp(taint["timeAdded"])
    record_figure(
        f"two nodes: a node killed to its Ready Unknown {unknown_at - killed_at:.0f} s by the "
        f"condition's time (seen {seen_unknown - killed_at:.1f} s), to the {UNREACHABLE} "
        f"NoExecute taint {tainted_at - killed_at:.0f} s by its time "
        f"(seen {seen_tainted - killed_at:.1f} s)"
    )


def _assert_healed(pool: Pool, second: str, leased: str, lost_idle: list[str],
                   before: dict[str, str]) -> None:  # fmt: skip
    """The pool at its ceiling with the lost idle instances replaced on the live node; the
    leased one kept, its holder told."""
    first = pool.cluster.node_names[0]
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


def test_a_killed_node_goes_unknown_its_pool_heals_and_it_comes_back_clean(
    cluster: NodeCluster, pool: Pool
) -> None:
    first, second = cluster.node_names
    _fill_both_nodes(pool)
    placed = _node_of(pool)
    assert set(placed.values()) == {first, second}, placed  # both nodes run instances
    on_second = sorted(n for n, node in placed.items() if node == second)
    leased = on_second[0]
    assert pool.lease(LEASE, exporter=leased) == leased
    before = {e["metadata"]["name"]: e["metadata"]["uid"] for e in pool.exporters()}
    web = get(cluster, "default", "pod", "web-2")
    assert web["status"]["phase"] == "Running" and web["spec"]["nodeName"] == second
    processes = _task_processes(cluster, second)
    assert processes, "the second node runs Pods' processes"

    killed = time.monotonic()
    killed_at = cluster.kill_node(second)
    _assert_dead(cluster, second, processes, web)
    _wait_unknown_and_tainted(cluster, second, killed_at)
    lost_idle = [n for n in on_second if n != leased]

    def healed() -> bool:
        names = {e["metadata"]["name"] for e in pool.exporters()}
        replacements = names - set(before)
        fresh = pool.registered() & replacements
        return not (set(lost_idle) & names) and len(fresh) >= len(lost_idle)

    pool.wait("the lost idle instances replaced and removed", healed, timeout=HEALED_WITHIN_S)
    replaced = time.monotonic()
    _assert_healed(pool, second, leased, lost_idle, before)
    whole = pool.wait_warm(3, timeout=120) + time.monotonic() - killed
    record_figure(
        f"node loss: kill -> lost idle instance replaced (Registered) and removed "
        f"{replaced - killed:.0f} s; kill -> the pool whole again (3 available, 1 leased "
        f"on the lost node) {whole:.0f} s"
    )
    # A Pod that is no instance is not evicted yet: it tolerates the taint 300 s
    # (DefaultTolerationSeconds).
    assert get(cluster, "default", "pod", "web-2")["metadata"].get("deletionTimestamp") is None

    # The lease ends: the leased instance goes too, and is replaced.
    pool.release(LEASE)
    pool.wait(
        f"{leased} removed after its lease",
        lambda: leased not in {e["metadata"]["name"] for e in pool.exporters()},
        timeout=120,
    )
    pool.wait("Degraded cleared", lambda: pool.condition("Degraded").get("status") == "False")

    # The node comes back Ready, untainted, its containerd and kubelet running again over
    # its old state: the lost instances' Pods are cleaned away, none of them registers
    # again, nothing is duplicated.
    returned = time.time()
    cluster.return_node(second)
    ready_at = time.time()
    _, found = _wait_for_node(cluster, second, lambda n: _unreachable(n) is None)
    record_figure(
        f"two nodes: a killed node started again to Ready {ready_at - returned:.1f} s, "
        f"its unreachable taint gone {time.time() - returned:.1f} s"
    )
    assert _ready(found)["status"] == "True"
    assert processes_of(cluster.node(second).workdir)
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
        f"node loss: the node back -> the lost instances' Pods gone {time.time() - returned:.0f} s"
    )
    # Their Exporters are gone, so no exporter of theirs can register again.
    names = {e["metadata"]["name"] for e in pool.exporters()}
    assert not names & gone and len(names) == 4


@pytest.mark.timeout(300)
def test_stopping_with_a_killed_node_leaves_nothing_on_the_host(
    cluster: NodeCluster, host_before: dict[str, Any]
) -> None:
    second = cluster.node_names[1]
    sleeper = _pinned(busybox_pod(cluster, "sleeper", "exec sleep 3600"), second)
    apply(cluster, "default", sleeper)
    wait_for_phase(cluster, "default", "sleeper", ("Running",))
    cluster.kill_node(second)
    cluster.stop()  # what the module's fixture would do at its end; it then does nothing
    # The fixture holds the machine's lock until the module ends: no other cluster runs.
    assert_clean(cluster.workdir, host_before, lock=False)
