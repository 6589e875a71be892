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
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.controlplane import jumpstarter_crds
from harness.guest import build_marker_guest
from harness.images import build_qemu_exporter
from harness.jumpstarter import JumpstarterSupply
from harness.kubevirt_install import AVAILABLE_TIMEOUT_S, KubeVirtInstall
from harness.kubevirt_install import remove as remove_kubevirt
from harness.node import NodeCluster, running_node_cluster
from tests.node.hoststate import host_state, leftovers
from tests.node.kubevirt_pools import kubevirt_ready
from tests.node.pool_support import node_jumpstarters
from tests.node.sharing import Share, group_of, runs_beside, share_of_run, split, workers_of
from tests.node.support import (
    LOCK_WAIT_S,
    NODE_COUNT,
    OWN_NODE_CLUSTER,
    USES_KUBEVIRT,
    record_figure,
    record_timings,
)

# How long a worker beside waits for the owner's cluster (its start, which may itself
# wait for the machine), and the owner for the groups beside to finish before it stops
# the cluster or restarts the kubelet (they take about as long as its own modules:
# tests/node/sharing.py; this is for a slow machine, not a figure).
ATTACH_WAIT_S = LOCK_WAIT_S + 120.0
DONE_WAIT_S = 600.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.node)


class SharedCluster:
    """The node cluster the tier's modules share (its start and stop, and the images
    imported into it, paid once), started on first use and stopped at the session's end,
    or before a module that needs the machine to itself (`OWN_NODE_CLUSTER`).

    Under `make test` other workers may run the modules of `sharing.BESIDE` on it
    meanwhile, a group each (tests/node/sharing.py): this worker then either owns the
    cluster (starts it, publishes it, waits for every group's done mark before it stops
    it) or runs a group beside (attaches, marks the group done after its last module).
    Where a module of this worker's group needs KubeVirt (`USES_KUBEVIRT`, last of its
    group), KubeVirt is installed in the background from the group's first module on, with
    its pools' images: its two minutes, mostly its components starting one after another,
    pass while they run; after the group's last, KubeVirt is removed again."""

    def __init__(self, share: Share | None, kubevirt_group: str | None) -> None:
        self.share = share
        self._kubevirt_group = kubevirt_group  # the group of the modules that need KubeVirt
        self._kubevirt_wanted = kubevirt_group is not None
        self._hosts_kubevirt = self._kubevirt_wanted  # this run installs it on the cluster
        self._stack: contextlib.ExitStack | None = None
        self.cluster: NodeCluster | None = None
        self._jumpstarters: JumpstarterSupply | None = None
        self._kubevirt: Future[KubeVirtInstall] | None = None
        self._attach_error: BaseException | None = None
        self._beside = False  # attached to another worker's cluster
        self._group = ""  # the group of `sharing.BESIDE` it runs, attached
        self._done = False  # attached, and told the owner this worker's modules are done
        self._alone = False  # the other worker's modules are done with this one's cluster
        self._before: dict[str, Any] = {}
        # What its last stop left on the host (tests/node/test_teardown.py); None until
        # it stopped once.
        self.left: list[str] | None = None

    def get(self, group: str | None = None) -> NodeCluster:
        """The cluster, for a module of `sharing.BESIDE`'s `group` when given."""
        if self.cluster is None:
            if self.share is not None and group is not None:
                self.cluster = self._attach(self.share, group)
            else:
                self.cluster = self._start()
        wants = group is not None and group == self._kubevirt_group
        if wants and self._kubevirt_wanted and self._kubevirt is None:
            self._kubevirt = ThreadPoolExecutor(1, "kubevirt").submit(kubevirt_ready, self.cluster)
        return self.cluster

    def _start(self) -> NodeCluster:
        self._before = host_state()
        self._stack = contextlib.ExitStack()
        try:
            started = running_node_cluster(wait=LOCK_WAIT_S, shared_root=self._hosts_kubevirt)
            cluster = self._stack.enter_context(started)
        except BaseException as error:
            if self.share is not None:
                self.share.publish_failure(error)
            raise
        if self.share is not None:
            self.share.publish(cluster)
        return cluster

    def _attach(self, share: Share, group: str) -> NodeCluster:
        if self._attach_error is not None:  # one wait, not one per module
            raise self._attach_error
        try:
            cluster = share.attach(ATTACH_WAIT_S)
        except BaseException as error:
            self._attach_error = error
            share.mark_done(group)  # nothing of this worker's will use the cluster
            raise
        self._beside, self._group = True, group
        return cluster

    def kubevirt(self) -> KubeVirtInstall:
        """KubeVirt on the cluster, once its background install is Available."""
        self.get(self._kubevirt_group)
        assert self._kubevirt is not None, "no module of this run needs KubeVirt"
        return self._kubevirt.result(timeout=AVAILABLE_TIMEOUT_S)

    def after_beside(self) -> None:
        """After the last module of a group of `sharing.BESIDE`: KubeVirt removed (its VMs
        stopped at once first: the marker guest ignores ACPI), the host cleaned; attached,
        this worker's Jumpstarters stopped and the owner told."""
        future, self._kubevirt, self._kubevirt_wanted = self._kubevirt, None, False
        try:
            if future is not None:
                remove_kubevirt(future.result(timeout=AVAILABLE_TIMEOUT_S))
        finally:
            if self._beside and not self._done:
                self._done = True
                self._close_jumpstarters()
                assert self.share is not None
                self.share.mark_done(self._group)

    def alone(self) -> None:
        """Until no other worker's modules use this worker's cluster (at once when none
        does)."""
        if self.share is None or self._beside or self._alone or self._stack is None:
            return
        waited = self.share.wait_done(DONE_WAIT_S)
        self._alone = True
        record_figure(f"node: the first worker waited {waited:.1f} s for the others' modules")

    def jumpstarters(self, tmp: pytest.TempPathFactory) -> JumpstarterSupply:
        """One supply for every module on this cluster: the controller it starts while a
        module's last test runs serves the next module's first (a start is about 10 s)."""
        if self._jumpstarters is None:
            self._jumpstarters = node_jumpstarters(self.get(), tmp.mktemp("jumpstarter"), "pool")
        return self._jumpstarters

    def _close_jumpstarters(self) -> None:
        if self._jumpstarters is not None:
            self._jumpstarters.close()
        self._jumpstarters = None

    def stop(self) -> None:
        if self._beside:  # the owner stops it
            self.after_beside()
            self.cluster = None
            return
        try:
            self.alone()
        finally:
            self._stop()

    def _stop(self) -> None:
        self._close_jumpstarters()
        if self._kubevirt is not None:  # its modules did not finish (`after_beside`)
            with contextlib.suppress(Exception):
                self.after_beside()
        try:
            if self._stack is not None and self.cluster is not None:
                self._stack.close()
                record_timings("the modules sharing one cluster", self.cluster)
                self.left = leftovers(self.cluster.workdir, self._before)
        finally:
            if self.share is not None and self._alone:
                self.share.remove()
            self._stack, self.cluster = None, None


@pytest.fixture(scope="session")
def shared_node_cluster(request: pytest.FixtureRequest) -> Iterator[SharedCluster]:
    items = request.session.items
    workerinput = getattr(request.config, "workerinput", None)
    share = share_of_run(workerinput, (i.nodeid for i in items))
    kubevirt = (
        _group_of(request, i.nodeid)
        for i in items
        if getattr(getattr(i, "module", None), USES_KUBEVIRT, False)
    )
    shared = SharedCluster(share, next(kubevirt, None))
    yield shared
    shared.stop()


_GROUP_WORKERS = pytest.StashKey[int]()


def _group_of(request: pytest.FixtureRequest, nodeid: str) -> str | None:
    """The group of `sharing.BESIDE` a test is in, None for the owner's: laid out for the
    run's workers where its node tier is split, as the scheduler lays it (tests/conftest.py),
    else all one."""
    if not runs_beside(nodeid):
        return None
    stash = request.config.stash
    if _GROUP_WORKERS not in stash:
        workers = workers_of(getattr(request.config, "workerinput", None))
        nodeids = [i.nodeid for i in request.session.items]
        stash[_GROUP_WORKERS] = workers if split(nodeids, workers) else 1
    return group_of(nodeid, stash[_GROUP_WORKERS])


def _last_of_group(request: pytest.FixtureRequest, group: str) -> bool:
    """Whether the requesting module is the run's last of `group`."""
    found = [i for i in request.session.items if _group_of(request, i.nodeid) == group]
    return bool(found) and found[-1].path == request.path


@pytest.fixture(scope="module")
def node_cluster(
    request: pytest.FixtureRequest, shared_node_cluster: SharedCluster
) -> Iterator[NodeCluster]:
    """The shared cluster; a module that sets OWN_NODE_CLUSTER (one that drains the node or
    uninstalls CRDs) gets one of its own, after the shared one stopped (one cluster runs
    on a machine at a time), of NODE_COUNT nodes if it says. Those modules come last in
    the tier (tests/conftest.py)."""
    if not getattr(request.module, OWN_NODE_CLUSTER, False):
        group = _group_of(request, request.node.nodeid)
        yield shared_node_cluster.get(group)
        if group is not None and _last_of_group(request, group):
            shared_node_cluster.after_beside()
        return
    shared_node_cluster.stop()
    nodes = getattr(request.module, NODE_COUNT, 1)
    with running_node_cluster(wait=LOCK_WAIT_S, nodes=nodes) as cluster:
        yield cluster
    record_timings(request.module.__name__.rsplit(".", 1)[-1], cluster)


@pytest.fixture
def node_alone(shared_node_cluster: SharedCluster) -> None:
    """For a test that restarts the node's kubelet or containerd: the modules another
    worker runs on the shared cluster (tests/node/sharing.py) are done first."""
    shared_node_cluster.alone()


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


@pytest.fixture(scope="module")
def kubevirt(node_cluster: NodeCluster, shared_node_cluster: SharedCluster) -> KubeVirtInstall:
    """KubeVirt installed on the shared cluster, its pools' images imported (begun in the
    background with the first module beside the others; removed after the last)."""
    waited = time.monotonic()
    installed = shared_node_cluster.kubevirt()
    record_figure(
        f"kubevirt: install to Available {installed.timings['install']:.1f} s in the "
        f"background, waited for {time.monotonic() - waited:.1f} s {installed.timings}"
    )
    return installed
