"""The node tier on several workers (tests/node/sharing.py): what the owner publishes of
its cluster is what the others need to use it, and the marks between them arrive or say
why not."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane
from harness.node import NodeCluster, attached_node_cluster
from harness.nodehost import NETWORK, Ledger
from harness.nodeworker import Node
from tests.node.sharing import Share


def _cluster(root: Path) -> NodeCluster:
    plane = ControlPlane(
        workdir=root,
        port=23456,
        token="admin-token",
        binaries={"kubectl": root / "kubectl", "kube-apiserver": root / "kube-apiserver"},
        address=NETWORK.node_ip,
        tokens={"system:kube-proxy": "proxy-token"},
        ca_path=root / "pki" / "ca.crt",
    )
    nodes = [Node(network, plane, root, plane.ca_file, up=True) for network in NETWORK.nodes(2)]
    return NodeCluster(
        workdir=root,
        plane=plane,
        ledger=Ledger(root),
        nodes=nodes,
        images={"pause": "localhost/pause:1", "busybox": "localhost/busybox:1"},
    )


def test_the_attached_cluster_reaches_what_the_owner_s_does(tmp_path: Path) -> None:
    owner = _cluster(tmp_path)
    description = json.loads(json.dumps(owner.description()))  # as the file carries it
    description["running"] = ["kube-apiserver", "kubelet"]
    attached = attached_node_cluster(description)
    assert attached.kubeconfig == owner.kubeconfig
    assert attached.plane.server == owner.plane.server
    assert attached.plane.ca_file == owner.plane.ca_file
    assert attached.plane.tokens == owner.plane.tokens
    assert attached.plane.binaries == owner.plane.binaries
    assert attached.node_names == owner.node_names
    assert [n.containerd_socket for n in attached.nodes] == [
        n.containerd_socket for n in owner.nodes
    ]
    assert attached.images == owner.images
    assert all(node.up for node in attached.nodes)
    assert attached.plane.is_running("kube-apiserver")
    assert not attached.plane.is_running("etcd")
    attached.stop()  # the owner's to do: nothing happens here
    assert not list(tmp_path.iterdir())


def test_the_other_worker_attaches_once_the_owner_publishes(tmp_path: Path) -> None:
    share = Share(tmp_path / "share")
    owner = _cluster(tmp_path)
    later = threading.Timer(0.3, share.publish, (owner,))
    later.start()
    began = time.monotonic()
    attached = share.attach(timeout=30)
    assert time.monotonic() - began >= 0.2
    assert attached.plane.server == owner.plane.server


def test_a_cluster_that_did_not_start_fails_the_other_worker_with_why(tmp_path: Path) -> None:
    share = Share(tmp_path / "share")
    share.publish_failure(RuntimeError("node cluster: kubelet exited"))
    with pytest.raises(RuntimeError, match="did not start: RuntimeError: node cluster: kubelet"):
        share.attach(timeout=30)


def test_no_publication_and_no_done_mark_end_in_a_timeout_naming_the_file(
    tmp_path: Path,
) -> None:
    share = Share(tmp_path / "share")
    with pytest.raises(TimeoutError, match=r"cluster\.json"):
        share.attach(timeout=0.2)
    with pytest.raises(TimeoutError, match=r"beside\.done"):
        share.wait_done(timeout=0.2)


def test_the_done_mark_ends_the_owner_s_wait_and_the_share_is_removed(tmp_path: Path) -> None:
    share = Share(tmp_path / "share")
    share.mark_done()
    assert share.wait_done(timeout=1) < 1
    share.remove()
    assert not share.folder.exists()


def test_the_owner_waits_for_every_group_s_done_mark(tmp_path: Path) -> None:
    share = Share(tmp_path / "share", frozenset({"beside", "beside-2"}))
    share.mark_done("beside")
    with pytest.raises(TimeoutError, match=r"beside-2\.done"):
        share.wait_done(timeout=0.2)
    later = threading.Timer(0.3, share.mark_done, ("beside-2",))
    later.start()
    assert 0.2 <= share.wait_done(timeout=30) < 30
