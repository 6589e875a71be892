"""Guests as Jumpstarter's users boot them, beyond x86_64 with SeaBIOS: an aarch64 guest
under AAVMF and an x86_64 guest under OVMF, each on a pool of the QEMU exporter image this
project ships, in the default layout (QEMU in the exporter's container, under TCG).

As in test_pools_node.py, the lease is the real 0.9.0 client's (`tests/lease_client.py`),
assigned and ended by Jumpstarter's released controller; the client flashes the guest
(`harness/guest.py`), powers it on and reads its console to the marker, and releases. The
firmware is what the pool's parameters render as the driver's `default_partitions` (never
named by the client). Each test prints its figures; no timing is asserted.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.provisioners.qemu_firmware import EXPORTER_FIRMWARE
from harness.guest import GUESTS, MARKER, build_guest
from harness.jumpstarter import JumpstarterSupply
from pool.model.jumpstarter import CONFIG_KEY, QEMU_DRIVER
from tests.node.guest_support import ClientRun, run_client
from tests.node.pool_support import Pool, fresh_pool
from tests.node.sharing import TENTH_OF_A_CORE
from tests.node.support import record_figure

# The first test's setup may build the QEMU exporter image and start the cluster.
pytestmark = pytest.mark.timeout(900)

GUEST_DRIVERS = [{"name": "qemu", "type": QEMU_DRIVER, "config": {"hostname": "guest"}}]
GUEST_RESOURCES = {"resources": {"cpu": 1, "memory": "256Mi"}}


@pytest.fixture(scope="module")
def uefi_guests() -> Mapping[str, Path]:
    """The UEFI marker guests' disks (built once per cache folder)."""
    return {name: build_guest(GUESTS[name]) for name in ("aarch64-uefi", "x86_64-uefi")}


def _one_guest_pool(
    node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path, name: str, **named: Any
) -> AbstractContextManager[Pool]:
    """A pool of one instance whose class names `named` beside the guest's size; a tenth
    of a core, beside the owner's guests (tests/node/sharing.py)."""
    parameters = {**named, **GUEST_RESOURCES}
    return fresh_pool(
        node_cluster, jumpstarters, tmp_path, name=name, parameters=parameters,
        class_spec=TENTH_OF_A_CORE,
    )  # fmt: skip


@pytest.fixture
def arm_pool(node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Pool]:
    """A pool of one aarch64 instance: its class names the architecture, nothing else."""
    with _one_guest_pool(node_cluster, jumpstarters, tmp_path, "arm", arch="aarch64") as p:
        yield p


@pytest.fixture
def uefi_pool(node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Pool]:
    """A pool of one x86_64 instance whose class names UEFI."""
    uefi = {"type": "uefi"}
    with _one_guest_pool(node_cluster, jumpstarters, tmp_path, "uefi", firmware=uefi) as p:
        yield p


def _leased_boots(
    pool: Pool, arch: str, guest: Path, boots: int, workdir: Path
) -> tuple[str, ClientRun]:
    """One instance warm, its rendered firmware (`arch`'s UEFI) checked, then a client
    session on it: the instance's name and the session's run."""
    pool.apply(drivers=GUEST_DRIVERS, minAvailableReplicas=1, maxReplicas=1)
    pool.wait_warm(1, timeout=180)
    (instance,) = pool.exporters()
    name = instance["metadata"]["name"]
    config_secret, _ = pool.instance_secrets(name)
    data = pool.secrets()[config_secret]["data"][CONFIG_KEY]
    qemu = yaml.safe_load(base64.b64decode(data))["export"]["qemu"]["config"]
    assert qemu["default_partitions"] == EXPORTER_FIRMWARE[arch], qemu
    client = pool.jumpstarter.client_config("tester")
    run = run_client(client, pool.selector, guest, boots, workdir)
    assert run.code == 0, f"{run.output}\n{pool.instance_logs()}"
    assert run.first("lease acquired")["exporter"] == name, run.output
    markers = [e["line"] for e in run.events if e["event"] == "marker"]
    assert len(markers) == boots and all(m.startswith(MARKER) for m in markers), run.output
    assert run.count("released") == 1, run.output
    return name, run


def _figure(what: str, name: str, guest: Path, run: ClientRun) -> None:
    flash = run.at("flashed") - run.at("flash started")
    record_figure(
        f"{what} ({name}): flash {guest.stat().st_size >> 20} MiB {flash:.1f} s; "
        f"power-on -> marker {run.boot_times()}"
    )


def test_an_aarch64_instance_boots_its_guest_under_aavmf_and_power_cycles(
    arm_pool: Pool, uefi_guests: Mapping[str, Path], tmp_path: Path
) -> None:
    """The released client leases the aarch64 instance, flashes the aarch64 guest, boots it
    to the marker, powers it off and on to the marker again, and releases it."""
    guest = uefi_guests["aarch64-uefi"]
    name, run = _leased_boots(arm_pool, "aarch64", guest, 2, tmp_path)
    _figure("aarch64 guest, AAVMF, TCG", name, guest, run)


def test_an_x86_64_instance_named_uefi_boots_its_guest_under_ovmf(
    uefi_pool: Pool, uefi_guests: Mapping[str, Path], tmp_path: Path
) -> None:
    guest = uefi_guests["x86_64-uefi"]
    name, run = _leased_boots(uefi_pool, "x86_64", guest, 1, tmp_path)
    _figure("x86_64 guest, OVMF, TCG", name, guest, run)
