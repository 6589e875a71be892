"""Fixtures for the node tier: a real single-node cluster on this machine (root).

Every test in this folder is marked `node`. The cluster is `harness.node`'s, the
one `make cluster` starts; it needs the binaries of `make control-plane` and Debian's
container packages, and fails (never skips) without them. How long each start and stop
took is printed at the end of the run.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.controlplane import jumpstarter_crds
from harness.guest import build_marker_guest
from harness.images import build_qemu_exporter
from harness.jumpstarter import JumpstarterSupply
from harness.node import NodeCluster, running_node_cluster
from tests.node.hoststate import host_state, leftovers
from tests.node.pool_support import node_jumpstarters
from tests.node.support import LOCK_WAIT_S, NODE_COUNT, OWN_NODE_CLUSTER, record_timings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.node)


class SharedCluster:
    """The node cluster the tier's modules share (its start and stop, and the images
    imported into it, paid once), started on first use and stopped at the session's end,
    or before a module that needs the machine to itself (`OWN_NODE_CLUSTER`)."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self.cluster: NodeCluster | None = None
        self._jumpstarters: JumpstarterSupply | None = None
        self._before: dict[str, Any] = {}
        # What its last stop left on the host (tests/node/test_teardown.py); None until
        # it stopped once.
        self.left: list[str] | None = None

    def get(self) -> NodeCluster:
        if self.cluster is None:
            self._before = host_state()
            self._stack = contextlib.ExitStack()
            self.cluster = self._stack.enter_context(running_node_cluster(wait=LOCK_WAIT_S))
        return self.cluster

    def jumpstarters(self, tmp: pytest.TempPathFactory) -> JumpstarterSupply:
        """One supply for every module on this cluster: the controller it starts while a
        module's last test runs serves the next module's first (a start is about 10 s)."""
        if self._jumpstarters is None:
            self._jumpstarters = node_jumpstarters(self.get(), tmp.mktemp("jumpstarter"), "pool")
        return self._jumpstarters

    def stop(self) -> None:
        if self._jumpstarters is not None:
            self._jumpstarters.close()
        if self._stack is not None and self.cluster is not None:
            self._stack.close()
            record_timings("the modules sharing one cluster", self.cluster)
            self.left = leftovers(self.cluster.workdir, self._before)
        self._stack, self.cluster, self._jumpstarters = None, None, None


@pytest.fixture(scope="session")
def shared_node_cluster() -> Iterator[SharedCluster]:
    shared = SharedCluster()
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def node_cluster(
    request: pytest.FixtureRequest, shared_node_cluster: SharedCluster
) -> Iterator[NodeCluster]:
    """The shared cluster; a module that sets OWN_NODE_CLUSTER (one that drains the node or
    uninstalls CRDs) gets one of its own, after the shared one stopped (one cluster runs
    on a machine at a time), of NODE_COUNT nodes if it says. Those modules come last in
    the tier (tests/conftest.py)."""
    if not getattr(request.module, OWN_NODE_CLUSTER, False):
        yield shared_node_cluster.get()
        return
    shared_node_cluster.stop()
    nodes = getattr(request.module, NODE_COUNT, 1)
    with running_node_cluster(wait=LOCK_WAIT_S, nodes=nodes) as cluster:
        yield cluster
    record_timings(request.module.__name__.rsplit(".", 1)[-1], cluster)


@pytest.fixture
def namespace(node_cluster: NodeCluster) -> str:
    """A fresh namespace whose Pods can start (default ServiceAccount, root CA)."""
    name = f"t-{secrets.token_hex(4)}"
    node_cluster.kubectl("create", "namespace", name)
    node_cluster.wait_for_namespace(name)
    return name


# -- what the pool modules share: the instance image, Jumpstarter, the marker guest --------


@pytest.fixture(scope="session")
def instance_archives() -> Mapping[str, Path]:
    """The QEMU exporter image built (once a session; the layer cache keeps a rebuild
    short), by the builder `make image` runs."""
    return {QEMU_EXPORTER_IMAGE: build_qemu_exporter()}


@pytest.fixture(scope="module")
def instance_images(node_cluster: Any, instance_archives: Mapping[str, Path]) -> None:
    """The QEMU exporter image imported into this module's node, and the product's CRDs
    installed beside Jumpstarter's release CRDs."""
    # KubeVirt's CRDs are virt-operator's where KubeVirt runs (test_kubevirt_node.py):
    # the one generated from its reference (crds/kubevirt/) is for the loopback tiers.
    node_cluster.plane.install_crds([p for p in jumpstarter_crds() if p.parent.name != "kubevirt"])
    started = time.monotonic()
    for name, archive in instance_archives.items():
        node_cluster.import_image(archive, name)
    print(f"\nnode: instance images imported in {time.monotonic() - started:.0f} s")


@pytest.fixture(scope="module")
def jumpstarters(
    request: pytest.FixtureRequest,
    node_cluster: Any,
    instance_images: None,
    shared_node_cluster: SharedCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[JumpstarterSupply]:
    """Fresh namespaces, each served by Jumpstarter's controller and router on the node IP
    (the next one started while a test uses the last): the shared cluster's supply, or a
    module's own on its own cluster."""
    if not getattr(request.module, OWN_NODE_CLUSTER, False):
        yield shared_node_cluster.jumpstarters(tmp_path_factory)
        return
    supply = node_jumpstarters(node_cluster, tmp_path_factory.mktemp("jumpstarter"), "pool")
    yield supply
    supply.close()


@pytest.fixture(scope="session")
def marker_guest() -> Path:
    """The marker guest's disk (built once per cache folder)."""
    return build_marker_guest()
