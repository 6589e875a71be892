"""Stopping the cluster undoes everything it did to the machine, a second start on the
same machine works (of two nodes), and a harness of two nodes killed mid-run (SIGKILL: no
cleanup of its own) is cleaned up by the next start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import REPO_ROOT, binary_dir
from harness.node import NODE_NAME, NodeCluster, running_node_cluster
from harness.nodehost import (
    TOOLS,
    cgroup_leftovers,
    chains,
    mounts_under,
    processes_of,
    remove_folder,
)
from harness.nodeimages import BUSYBOX_IMAGE
from tests.node.hoststate import assert_clean, host_state
from tests.node.support import (
    LOCK_WAIT_S,
    apply,
    busybox_pod,
    busybox_pod_named,
    record_timings,
    wait_for_phase,
)


def _on_node(name: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": name}}


def _use_the_cluster(cluster: NodeCluster) -> None:
    """Leave what a teardown must undo: a running Pod on each node (sandbox, mounts,
    cgroups, a veth), a Service (kube-proxy's rules) and a host port on each node's IP (the
    portmap plugin's chains)."""
    cluster.kubectl("create", "namespace", "busy")
    cluster.wait_for_namespace("busy")
    pods = [
        busybox_pod(
            cluster,
            "web" if node is cluster.nodes[0] else f"web-{node.number}",
            "exec httpd -f -p 8080 -h /",
            container={"ports": [{"containerPort": 8080, "hostPort": 18080,
                                  "hostIP": node.network.node_ip}]},
            **_on_node(node.name),
        )
        for node in cluster.nodes
    ]  # fmt: skip
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    apply(cluster, "busy", *pods, service)
    for pod in pods:
        wait_for_phase(cluster, "busy", pod["metadata"]["name"], ("Running",))
    assert mounts_under(cluster.workdir), "a running Pod mounts under the work folder"
    assert cgroup_leftovers(), "a running Pod has kubepods cgroups"
    assert any(chains(tool, "nat") for tool in TOOLS), "kube-proxy and portmap made chains"


# No cluster but the ones these tests start (the machine's state is compared before and
# after): the shared one is stopped first.
OWN_NODE_CLUSTER = True


@pytest.fixture(autouse=True, scope="module")
def _no_other_cluster(shared_node_cluster: Any) -> None:
    shared_node_cluster.stop()


@pytest.fixture
def tmp_root() -> Iterator[Path]:
    """A work folder short enough for containerd's sockets (a unix socket's path holds at
    most 104 bytes; pytest's tmp_path under a worker of xdist is longer)."""
    root = Path(tempfile.mkdtemp(prefix="vt-teardown-"))
    yield root
    remove_folder(root)


@pytest.mark.timeout(600)  # two starts and stops
def test_stop_leaves_nothing_and_a_second_start_works(
    tmp_root: Path, shared_node_cluster: Any
) -> None:
    """Where the tier's modules shared a cluster before this one (Pods, guests, Services,
    claims, host ports, a kubelet and a containerd restarted), its stop is the one checked:
    nothing of it is left on the host; the next start (the killed harness's test, then the
    modules after) is a second start on the same machine. Run alone, this test starts a
    cluster of one node and then of two in the same work folder, uses and stops each."""
    if shared_node_cluster.left is not None:
        assert shared_node_cluster.left == []
        return
    before = host_state()
    workdir = tmp_root / "node"
    for attempt, nodes in (("first start", 1), ("second start, two nodes", 2)):
        with running_node_cluster(workdir, wait=LOCK_WAIT_S, nodes=nodes) as cluster:
            record_timings(f"teardown test, {attempt}", cluster)
            _use_the_cluster(cluster)
        assert_clean(workdir, before)


@pytest.mark.timeout(600)  # two starts
def test_a_killed_harness_is_cleaned_up_by_the_next_start(tmp_root: Path) -> None:
    before = host_state()
    killed = tmp_root / "killed"
    harness = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cluster",
            "--workdir",
            str(killed),
            "--wait",
            str(LOCK_WAIT_S),
            "--nodes",
            "2",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert harness.stdout is not None
        output = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = harness.stdout.readline()
            output.append(line)
            if line.startswith("node cluster ready") or not line:
                break
        assert output[-1].startswith("node cluster ready"), "".join(output)
        # A Pod running on each node (container, sandbox, mounts), then the harness dies
        # without a chance to clean up.
        kubectl = [
            str(binary_dir() / "kubectl"),
            f"--kubeconfig={killed / 'kubeconfig'}",
            f"--cache-dir={killed / 'kubectl-cache'}",
        ]
        for number, node in enumerate((NODE_NAME, f"{NODE_NAME}-2"), start=1):
            name = f"sleeper-{number}"
            pod = busybox_pod_named(BUSYBOX_IMAGE, name, "sleep 3600", **_on_node(node))
            subprocess.run([*kubectl, "apply", "-f", "-"], input=json.dumps(pod), text=True,
                           check=True)  # fmt: skip
            subprocess.run([*kubectl, "wait", "--for=condition=Ready", f"pod/{name}",
                            "--timeout=120s"], check=True, timeout=130)  # fmt: skip
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(timeout=30)
        time.sleep(1)
        assert mounts_under(killed), "the killed harness left its containers' mounts"
    finally:
        if harness.poll() is None:  # the test failed before the kill: stop it properly
            harness.send_signal(signal.SIGINT)
            harness.wait(timeout=120)

    with running_node_cluster(tmp_root / "next", wait=LOCK_WAIT_S) as cluster:
        record_timings("after a killed harness", cluster)
        assert processes_of(killed) == {} and mounts_under(killed) == []
        pod = busybox_pod(cluster, "hello", "echo hello")
        apply(cluster, "default", pod)
        assert wait_for_phase(cluster, "default", "hello", ("Succeeded",))
    assert_clean(killed, before)
