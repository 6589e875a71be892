"""Fixtures for the node tier: a real single-node cluster on this machine (root).

Every test in this folder is marked `node`. The cluster is `harness.node`'s, the
one `make cluster` starts; it needs the binaries of `make control-plane` and Debian's
container packages, and fails (never skips) without them. How long each start and stop
took is printed at the end of the run.
"""

from __future__ import annotations

import os
import secrets
import tempfile
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
from harness.nodeshare import SharedNodeCluster
from tests.node.pool_support import node_jumpstarters
from tests.node.support import LOCK_WAIT_S, NODE_COUNT, OWN_NODE_CLUSTER, record_timings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _in_tier(item):
            item.add_marker(pytest.mark.node)


def _in_tier(item: pytest.Item) -> bool:
    return Path(__file__).parent in Path(str(item.fspath)).parents


def _shares(module: Any) -> bool:
    """A module runs on the shared cluster unless it needs the machine to itself."""
    return module is not None and not getattr(module, OWN_NODE_CLUSTER, False)


_SHARED = pytest.StashKey[SharedNodeCluster]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """The modules of this run that share one cluster (every process of the run collects
    the same ones), and the folder where the run's processes meet to share it."""
    in_tier = (getattr(item, "module", None) for item in session.items if _in_tier(item))
    modules = {module.__name__ for module in in_tier if _shares(module)}
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"{os.getpid()}-{secrets.token_hex(4)}"
    # Under xdist the workers' parent is the run; the keeper stops when it is gone.
    owner = os.getppid() if "PYTEST_XDIST_WORKER" in os.environ else os.getpid()
    folder = Path(tempfile.gettempdir()) / f"vt-node-share-{run}"
    session.config.stash[_SHARED] = SharedNodeCluster(folder, modules, owner, LOCK_WAIT_S)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After a shared module's last test (its fixtures torn down), tell the shared cluster
    it is done with it; the last module's process stops it, and records its times."""
    try:
        return (yield)
    finally:
        module = getattr(item, "module", None)
        shared = item.config.stash.get(_SHARED, None)
        last = nextitem is None or getattr(nextitem, "module", None) is not module
        if last and shared is not None and module is not None and _shares(module):
            timings = shared.done(module.__name__)
            if timings is not None:
                record_timings("the modules sharing one cluster", timings)


@pytest.fixture(scope="session")
def shared_node_cluster(request: pytest.FixtureRequest) -> SharedNodeCluster:
    """The cluster the tier's modules share, across the run's processes
    (`harness.nodeshare`): `.stopped()` waits until it has stopped."""
    return request.config.stash[_SHARED]


@pytest.fixture(scope="module")
def node_cluster(
    request: pytest.FixtureRequest, shared_node_cluster: SharedNodeCluster
) -> Iterator[NodeCluster]:
    """The shared cluster; a module that sets OWN_NODE_CLUSTER (one that drains the node,
    uninstalls CRDs or kills a node) gets one of its own, once the shared one has stopped
    (one cluster runs on a machine at a time), of NODE_COUNT nodes if it says. Those
    modules come last in the tier (tests/conftest.py)."""
    if _shares(request.module):
        yield shared_node_cluster.get()
        return
    shared_node_cluster.stopped()
    nodes = getattr(request.module, NODE_COUNT, 1)
    with running_node_cluster(wait=LOCK_WAIT_S, nodes=nodes) as cluster:
        yield cluster
    record_timings(request.module.__name__.rsplit(".", 1)[-1], cluster.timings)


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
    with node_cluster.exclusive("crds"):  # one apply at a time, whichever process asks
        node_cluster.plane.install_crds(jumpstarter_crds())
    started = time.monotonic()
    for name, archive in instance_archives.items():
        node_cluster.import_image(archive, name)
    print(f"\nnode: instance images imported in {time.monotonic() - started:.0f} s")


@pytest.fixture(scope="module")
def jumpstarters(
    node_cluster: Any, instance_images: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JumpstarterSupply]:
    """Fresh namespaces, each served by Jumpstarter's controller and router on the node IP
    (the next one started while a test uses the last)."""
    supply = node_jumpstarters(node_cluster, tmp_path_factory.mktemp("jumpstarter"), "pool")
    yield supply
    supply.close()


@pytest.fixture(scope="session")
def marker_guest() -> Path:
    """The marker guest's disk (built once per cache folder)."""
    return build_marker_guest()
