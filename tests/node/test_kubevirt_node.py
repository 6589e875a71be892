"""KubeVirt v1.7.0, built here from its Go module, runs a VM of the marker guest.

The gate for a `kubevirt.jumpstarter.dev` provisioner: KubeVirt installed as its users
install it (`harness.kubevirt_install`: kubevirt-operator.yaml, then kubevirt-cr.yaml with
`useEmulation`, waited for `Available`), once for the module; a VirtualMachine whose disk is
a containerDisk of the SeaBIOS marker guest (`harness.guest`) is created Halted, patched to
`runStrategy: Always`, and its serial console, read through virt-api's `console`
subresource as `virtctl console` reads it, shows the marker. Figures: install to
Available, power-on to marker, the module's wall time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.guest import MARKER
from harness.kubevirt_build import marker_containerdisk
from harness.kubevirt_install import KubeVirtInstall, installed_kubevirt, read_console
from harness.node import NodeCluster
from tests.node.support import record_figure

# The first build of KubeVirt's images is `make kubevirt`'s; here they are current.
pytestmark = pytest.mark.timeout(1200)

VM = "marker"
BOOT_TIMEOUT_S = 300.0


@pytest.fixture(scope="module")
def kubevirt(node_cluster: NodeCluster) -> Iterator[KubeVirtInstall]:
    """KubeVirt installed for the module; removed, and the host cleaned, after it."""
    began = time.monotonic()
    with installed_kubevirt(node_cluster) as kv:
        record_figure(f"kubevirt: install to Available {kv.timings['install']:.1f} s {kv.timings}")
        yield kv
    record_figure(
        f"kubevirt: module {time.monotonic() - began:.1f} s "
        f"(uninstall {kv.timings['uninstall']:.1f} s)"
    )


def marker_vm(image: str) -> dict[str, Any]:
    """A Halted VM of one containerDisk, no NIC and no VNC: only its serial console."""
    devices = {
        "autoattachPodInterface": False,
        "autoattachGraphicsDevice": False,
        "disks": [{"name": "disk0", "disk": {"bus": "virtio"}}],
    }
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": VM},
        "spec": {
            "runStrategy": "Halted",
            "template": {
                "spec": {
                    # The guest has no ACPI handler: power-off is immediate, not 180 s later.
                    "terminationGracePeriodSeconds": 0,
                    "domain": {"devices": devices, "resources": {"requests": {"memory": "256Mi"}}},
                    "volumes": [{"name": "disk0", "containerDisk": {"image": image}}],
                }
            },
        },
    }


def _run_strategy(cluster: NodeCluster, namespace: str, strategy: str) -> None:
    patch = json.dumps({"spec": {"runStrategy": strategy}})
    cluster.kubectl("patch", "vm", VM, "-n", namespace, "--type=merge", "-p", patch)


def test_vm_boots_to_marker_on_its_serial_console(
    node_cluster: NodeCluster, kubevirt: KubeVirtInstall, namespace: str
) -> None:
    archive, image = marker_containerdisk()
    node_cluster.import_image(archive, image)
    node_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(marker_vm(image)))
    powered_on = time.monotonic()
    _run_strategy(node_cluster, namespace, "Always")
    shown = read_console(node_cluster, namespace, VM, until=MARKER, timeout=BOOT_TIMEOUT_S)
    record_figure(f"kubevirt: power-on to marker {time.monotonic() - powered_on:.1f} s")
    assert MARKER in shown
    _run_strategy(node_cluster, namespace, "Halted")
    node_cluster.kubectl(
        "wait", "--for=delete", f"vmi/{VM}", "-n", namespace, "--timeout=120s", timeout=150
    )
    node_cluster.kubectl("delete", "vm", VM, "-n", namespace, "--wait=true")
