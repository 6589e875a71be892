"""The node tier's pure parts: image names as the CRI resolves them, the address plan,
and the record of host changes (the cluster itself is tested in tests/node)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from harness.nodehost import NETWORK, Ledger
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
    ledger = Ledger(tmp_path, address=NETWORK.node_ip, sysctls={"net/ipv4/ip_forward": "0"})
    ledger.host_dirs = ["/var/lib/cni"]
    ledger.save()
    assert Ledger.load(tmp_path) == ledger
    assert Ledger.load(tmp_path / "gone") == Ledger(tmp_path / "gone")  # nothing recorded
