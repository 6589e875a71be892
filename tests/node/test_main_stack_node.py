"""Jumpstarter main's whole stack on the node, three ways, on main's own e2e pool
(`tests/node/main_stack.py`): main's exporter and QEMU runtime images in its sidecar
layout, main's controller and router under main's operator, leases by main's client. The
pool is filled in turn by this product under main's operator (the operator's default
layout), by main's own exporter-set controller under main's operator (which takes the pool
as this product left it), and, once the operator's provisioner is disabled, by this product
installed on its own (the release's self-signed overlay) with `layout: sidecar`, which takes
on the pool main's controller filled. Each way: a lease flashes the marker guest and boots
it to its marker, the released instance's exporter exits on the lease's end, and a
successor comes up; the three successors' Pod specs are compared.

On a cluster of its own, outside `make test` (`make main-stack`: about 225 s, which would
take `make test` past 20 minutes; docs/measurements.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.deploy_render import REPO
from harness.guest import MARKER
from harness.jumpstarter_images import MAIN_EXPORTERSET_CONTROLLER_IMAGE
from harness.node import NodeCluster
from tests.dropin import ACCOUNT
from tests.e2e.objects import get_json, wait_for
from tests.installpage import NODE_MAIN_OPERATOR_DISABLE, NODE_MAIN_OPERATOR_WEBHOOK
from tests.node.install import Install
from tests.node.lab import LAB, available, instances
from tests.node.main_stack import (
    DISK,
    JUMPSTARTER,
    MAIN_RENDERS,
    PFLASH,
    Session,
    controller_pods,
    differences,
    exporters,
    import_main_images,
    installed_by_main_operator,
    instance_layout,
    lease_and_release,
    main_pool,
)
from tests.node.support import record_figure

OWN_NODE_CLUSTER = True
pytestmark = [pytest.mark.main_stack, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def installed(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Install:
    return installed_by_main_operator(node_cluster, tmp_path_factory)


# Main's e2e pool (tests/node/main_stack.py), filled three ways in turn; each way's instance
# Pod's sidecar layout, for the differences the last test records.
MAIN_POOL = main_pool()
_PODS: dict[str, dict[str, Any]] = {}  # the leased instance Pod of each way


def _deployment_runs(installed: Install, image: str) -> bool:
    """The operator's Deployment for the provisioner rolled out to `image`: Available, and
    only Pods of that image left."""
    deployment = get_json(installed.cluster, "deployment", ACCOUNT, "-n", LAB)
    template = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    found = controller_pods(installed)
    return (
        template == image
        and available(installed, LAB, ACCOUNT)
        and bool(found)
        and all(p["spec"]["containers"][0]["image"] == image for p in found)
    )


def _served(installed: Install, way: str, session: Session) -> None:
    """What every way must show: main's layout in the leased instance's Pod, QEMU run in its
    runtime sidecar, the marker booted, and a successor; then the figures."""
    # QEMU ran in the runtime sidecar, on SeaBIOS (no firmware found in the exporter's
    # container: tests/node/main_stack.py, GUEST), its disk on the shared volume.
    assert session.qemu and not any(PFLASH in args for args in session.qemu), session.qemu
    assert all(DISK in args for args in session.qemu), session.qemu
    for pod in (session.pod, session.successor_pod):
        layout = instance_layout(pod)
        assert {k: layout[k] for k in MAIN_RENDERS} == MAIN_RENDERS, layout
    _PODS[way] = session.successor_pod  # what the way's own controller rendered
    markers = [e["line"] for e in session.run.events if e["event"] == "marker"]
    assert len(markers) == 1 and markers[0].startswith(MARKER), session.run.output
    record_figure(session.figures(way))


def _record_takeover(way: str, filled: dict[str, Any], session: Session) -> None:
    """Whether the instance the previous controller filled was the one leased (kept at the
    takeover) or replaced first."""
    kept = session.leased["metadata"]["uid"] == filled["metadata"]["uid"]
    name = filled["metadata"]["name"]
    record_figure(f"main's stack, {way}: the instance {name} {'kept' if kept else 'replaced'}")


def test_main_s_pool_under_this_product_in_the_operator_s_default_layout(
    installed: Install, tmp_path: Path
) -> None:
    """Main's e2e manifest as it is, this product the operator's QEMU controller: main's
    sidecar layout (the operator's default), main's images, main's client."""
    cluster = installed.cluster
    cluster.kubectl("delete", "-f", str(REPO / "examples/node/pool/"), "--timeout=120s")
    wait_for("the node pool's instances gone", lambda: not instances(installed), 120)
    import_main_images(installed)
    cluster.kubectl("apply", "-f", "-", input=MAIN_POOL.documents())
    session = lease_and_release(installed, MAIN_POOL, tmp_path, "main-a")
    _served(installed, "this product under main's operator", session)


def test_main_s_own_exporterset_controller_fills_the_same_pool(
    installed: Install, tmp_path: Path
) -> None:
    """The `Jumpstarter` resource's provisioner without this product's image: the operator
    runs main's own exporter-set controller (its default image, built here from main's
    Containerfile), which takes the pool this product filled as it is, and replaces a
    released instance once its exporter has exited on the lease's end."""
    cluster = installed.cluster
    (filled,) = exporters(installed, MAIN_POOL)
    import_main_images(installed, controller=True)
    remove = '[{"op": "remove", "path": "/spec/exporterSets/provisioners/0/image"}]'
    cluster.kubectl("-n", LAB, "patch", "jumpstarter", JUMPSTARTER, "--type=json", "-p", remove)
    wait_for(
        "the operator's Deployment running main's exporter-set controller",
        lambda: _deployment_runs(installed, MAIN_EXPORTERSET_CONTROLLER_IMAGE),
        180,
    )
    session = lease_and_release(installed, MAIN_POOL, tmp_path, "main-b")
    _record_takeover("main's exporter-set controller", filled, session)
    # Main's controller replaces an instance only once its exporter has exited.
    assert session.exporter_exit == {"exitCode": 0, "reason": "Completed"}, session
    _served(installed, "main's exporter-set controller", session)


def test_this_product_on_its_own_in_the_sidecar_layout_takes_on_main_s_pool(
    installed: Install, tmp_path: Path
) -> None:
    """With the operator's provisioner disabled, this product installed on its own (the
    release's self-signed overlay, whose webhook is already there) and the class given
    `layout: sidecar`: it takes on the pool main's controller filled, and serves it."""
    cluster = installed.cluster
    (filled,) = exporters(installed, MAIN_POOL)
    installed.run(NODE_MAIN_OPERATOR_DISABLE)
    wait_for("the operator's controller gone", lambda: not controller_pods(installed), 120)
    # The webhook first (the release's kustomize tree and certificates, as
    # docs/development.md's block makes them), then the overlay's reconciler beside it.
    installed.run(NODE_MAIN_OPERATOR_WEBHOOK)
    cluster.kubectl("apply", "-f", "-", input=MAIN_POOL.with_layout("sidecar").documents())
    installed.kubectl("apply", "-k", str(installed.overlay))
    installed.rollout_status("virtualtarget-reconciler")
    session = lease_and_release(installed, MAIN_POOL, tmp_path, "main-c")
    _record_takeover("this product on its own", filled, session)
    _served(installed, "this product on its own", session)


def test_the_three_ways_render_main_s_layout_alike() -> None:
    """Each way's leased Pod had main's sidecar layout (asserted as it was served); where
    their specs differ is printed, one line each, for docs/comparison.md."""
    assert len(_PODS) == 3, sorted(_PODS)
    found = differences(_PODS.items())
    record_figure(f"main's stack: the leased instance Pods differ in {len(found)} fields")
    for line in found:
        record_figure(f"main's stack: {line}")
