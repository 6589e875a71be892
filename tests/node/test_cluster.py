"""The node tier's cluster works: each test exercises one part of Kubernetes that the
loopback tier lacks (kubelet and CNI, the apiserver-to-kubelet path, kube-proxy, the
garbage collector), plus the guard that keeps traffic on this machine."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import time

from harness.node import NodeCluster
from tests.node.support import apply, busybox_pod, get, wait_for_phase


def _guard_rejects(chain: str) -> int:
    """Packets the guard chain's REJECT rules have refused so far."""
    listing = subprocess.run(
        ["iptables", "-w", "-L", chain, "-n", "-v", "-x"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(line.split()[0]) for line in listing.splitlines()[2:] if "REJECT" in line)


def test_node_is_ready_on_its_own_address(node_cluster: NodeCluster) -> None:
    node = json.loads(
        node_cluster.kubectl("get", "node", node_cluster.node_name, "-o", "json").stdout
    )
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True", node["status"]["conditions"]
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == node_cluster.network.node_ip


def test_pod_runs_to_completion_and_its_log_is_read(
    node_cluster: NodeCluster, namespace: str
) -> None:
    command = 'echo "hello from $(hostname)"; ip -4 -o addr show eth0'
    apply(node_cluster, namespace, busybox_pod(node_cluster, "hello", command))
    pod = wait_for_phase(node_cluster, namespace, "hello", ("Succeeded", "Failed"))
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    # The log comes from the kubelet, through kube-apiserver (the node's InternalIP).
    log = node_cluster.kubectl("logs", "hello", "-n", namespace).stdout
    assert log.startswith("hello from hello\n"), log
    pod_ip = pod["status"]["podIP"]
    assert ipaddress.ip_address(pod_ip) in ipaddress.ip_network(node_cluster.network.pod_cidr)
    assert f"inet {pod_ip}/" in log, log  # the CNI bridge gave eth0 the Pod's address


def test_pod_reaches_a_cluster_ip_service_through_kube_proxy(
    node_cluster: NodeCluster, namespace: str
) -> None:
    web = busybox_pod(
        node_cluster,
        "web",
        "mkdir -p /www && echo web-ok > /www/index.html && exec httpd -f -p 8080 -h /www",
        container={
            "ports": [{"containerPort": 8080}],
            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
        },
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    apply(node_cluster, namespace, web, service)
    node_cluster.kubectl("wait", "--for=condition=Ready", "pod/web", "-n", namespace,
                         "--timeout=120s", timeout=130)  # fmt: skip
    cluster_ip = get(node_cluster, namespace, "service", "web")["spec"]["clusterIP"]
    # kube-proxy syncs its rules shortly after the endpoint becomes ready: try a while.
    fetch = (
        f"for i in $(seq 40); do timeout 3 wget -qO- http://{cluster_ip}/ && exit 0; "
        "sleep 0.5; done; exit 1"
    )
    apply(node_cluster, namespace, busybox_pod(node_cluster, "client", fetch))
    pod = wait_for_phase(node_cluster, namespace, "client", ("Succeeded", "Failed"))
    log = node_cluster.kubectl("logs", "client", "-n", namespace).stdout
    assert pod["status"]["phase"] == "Succeeded", (pod["status"], log)
    assert log == "web-ok\n"
    nat = subprocess.run(
        ["iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"-d {cluster_ip}/32" in nat  # the path was kube-proxy's


def test_garbage_collector_removes_an_owned_object(
    node_cluster: NodeCluster, namespace: str
) -> None:
    node_cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    uid = get(node_cluster, namespace, "configmap", "owner")["metadata"]["uid"]
    owned = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owned",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
            ],
        },
    }
    apply(node_cluster, namespace, owned)
    node_cluster.kubectl("delete", "configmap", "owner", "-n", namespace)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = node_cluster.kubectl("get", "configmap", "owned", "-n", namespace, check=False)
        if found.returncode != 0 and "NotFound" in found.stderr:
            return
        time.sleep(0.5)
    raise AssertionError("kube-controller-manager's garbage collector kept the owned ConfigMap")


def test_an_unused_cluster_ip_is_refused_on_this_machine(
    node_cluster: NodeCluster, namespace: str
) -> None:
    services = json.loads(node_cluster.kubectl("get", "services", "-A", "-o", "json").stdout)
    used = {s["spec"].get("clusterIP") for s in services["items"]}
    network = ipaddress.ip_network(node_cluster.network.service_cidr)
    unused = next(str(ip) for ip in reversed(list(network.hosts())) if str(ip) not in used)
    # The guard is in place before anything is sent: the packet can only be refused here.
    for parent in ("OUTPUT", "FORWARD"):
        jump = ["iptables", "-w", "-C", parent, "-j", f"VTNODE-{parent}"]
        assert subprocess.run(jump, capture_output=True).returncode == 0, jump
    before = _guard_rejects("VTNODE-OUTPUT")
    started = time.monotonic()
    try:
        socket.create_connection((unused, 80), timeout=10).close()
    except ConnectionRefusedError:
        pass
    else:
        raise AssertionError(f"something answered at the unused ClusterIP {unused}")
    print(f"host: {unused}:80 refused after {time.monotonic() - started:.3f} s")
    assert _guard_rejects("VTNODE-OUTPUT") > before  # refused by the guard, on this host

    before = _guard_rejects("VTNODE-FORWARD")
    probe = f"nc -w 10 {unused} 80 </dev/null 2>&1; echo exit=$?"
    apply(node_cluster, namespace, busybox_pod(node_cluster, "probe", probe))
    wait_for_phase(node_cluster, namespace, "probe", ("Succeeded", "Failed"))
    log = node_cluster.kubectl("logs", "probe", "-n", namespace).stdout
    assert "Connection refused" in log and "exit=1" in log, log
    assert _guard_rejects("VTNODE-FORWARD") > before  # a Pod's packet: refused forwarding
