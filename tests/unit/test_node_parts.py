"""The node tier's pure parts: image names as the CRI resolves them, the address plan,
and the record of host changes (the cluster itself is tested in tests/node)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from harness.nodehost import MAX_NODES, NETWORK, Ledger, _remove_stale_sockets
from harness.nodeimages import BUSYBOX_IMAGE, PAUSE_IMAGE, normalize


@pytest.mark.parametrize(
    ("name", "resolved"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("local/busybox:1", "docker.io/local/busybox:1"),
        ("localhost/virtualtarget/pause:v1.36.3", "localhost/virtualtarget/pause:v1.36.3"),
        ("registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10.2"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("quay.io/a/b@sha256:" + "0" * 64, "quay.io/a/b@sha256:" + "0" * 64),
    ],
)
def test_image_names_resolve_as_the_cri_resolves_them(name: str, resolved: str) -> None:
    assert normalize(name) == resolved


def test_the_node_images_need_no_registry_name_rewriting() -> None:
    for name in (PAUSE_IMAGE.format(version="v1.36.3"), BUSYBOX_IMAGE):
        assert normalize(name) == name


def test_every_cluster_address_is_inside_the_one_guarded_range() -> None:
    cluster = ipaddress.ip_network(NETWORK.cluster_range)
    pods = ipaddress.ip_network(NETWORK.pod_cidr)
    services = ipaddress.ip_network(NETWORK.service_cidr)
    node = ipaddress.ip_address(NETWORK.node_ip)
    assert pods.subnet_of(cluster) and services.subnet_of(cluster)  # type: ignore[arg-type]
    assert node in cluster and node not in pods and node not in services
    assert not pods.overlaps(services)
    assert NETWORK.gateway == "10.213.0.1"
    assert NETWORK.kubernetes_service_ip == "10.213.128.1"
    assert len(NETWORK.bridge) <= 15  # a Linux interface name


def test_the_record_of_host_changes_survives_its_process(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, addresses=[NETWORK.node_ip], sysctls={"net/ipv4/ip_forward": "0"})
    ledger.host_dirs = ["/var/lib/cni"]
    ledger.save()
    assert Ledger.load(tmp_path) == ledger
    assert Ledger.load(tmp_path / "gone") == Ledger(tmp_path / "gone")  # nothing recorded


def test_a_record_of_the_single_node_harness_loads(tmp_path: Path) -> None:
    (tmp_path / "host-changes.json").write_text('{"address": "10.213.255.1", "sysctls": {}}')
    assert Ledger.load(tmp_path).addresses == ["10.213.255.1"]
    (tmp_path / "host-changes.json").write_text('{"address": ""}')
    assert Ledger.load(tmp_path).addresses == []


def test_each_node_has_its_own_pod_range_ip_bridge_and_cgroup_inside_the_range() -> None:
    cluster = ipaddress.ip_network(NETWORK.cluster_range)
    services = ipaddress.ip_network(NETWORK.service_cidr)
    nodes = NETWORK.nodes(MAX_NODES)
    assert nodes[0] == NETWORK  # the first node is the cluster's own addresses
    assert [n.pod_cidr for n in nodes[:2]] == ["10.213.0.0/24", "10.213.1.0/24"]
    assert [n.node_ip for n in nodes[:2]] == ["10.213.255.1", "10.213.255.2"]
    assert [n.bridge for n in nodes[:2]] == ["vtnode0", "vtnode1"]
    assert [n.cgroup for n in nodes[:2]] == ["kubepods", "vtnode1"]
    assert nodes[1].gateway == "10.213.1.1"
    pods = [ipaddress.ip_network(n.pod_cidr) for n in nodes]
    for index, net in enumerate(pods):
        assert net.subnet_of(cluster) and not net.overlaps(services)  # type: ignore[arg-type]
        assert all(not net.overlaps(other) for other in pods[index + 1 :])
        assert ipaddress.ip_address(nodes[index].node_ip) in cluster
    assert len({n.node_ip for n in nodes} | {n.bridge for n in nodes}) == 2 * MAX_NODES
    assert len({n.cni_network for n in nodes}) == MAX_NODES
    with pytest.raises(ValueError, match="1 to"):
        NETWORK.node(MAX_NODES)


def test_a_killed_shims_socket_goes_and_a_listened_one_stays(tmp_path: Path) -> None:
    """A shim killed with its node leaves its socket file in /run/containerd/s; the sweep
    removes such a dead socket, and no file that something still listens on or that is
    no socket."""
    dead, alive, other = tmp_path / "dead", tmp_path / "alive", tmp_path / "not-a-socket"
    with socket.socket(socket.AF_UNIX) as gone:
        gone.bind(str(dead))  # bound and closed: the file stays, as a SIGKILLed shim's does
    other.write_text("")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(alive))
        listener.listen()
        _remove_stale_sockets(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["alive", "not-a-socket"]
