"""Jumpstarter main's operator and its whole stack on the node, on a cluster of its own.

docs/development.md's `node-main-operator` block as written: main's operator, controller
and router, built here from main's source, main's operator installed from its
`config/default`, then a `Jumpstarter` resource (examples/node/jumpstarter-main.yaml) whose
`spec.exporterSets.provisioners` names `qemu.jumpstarter.dev` with this product's image,
then the node pool. What the operator renders for the provisioner
(`createExporterSetDeployment`, `exporterSetPolicyRules` of its exporterset.go) runs this
product unchanged; a 0.9.0 client leases the node pool's instance through main's
controller, boots the marker guest on it through main's router and releases it, and the
successor comes up.

Then main's own e2e pool (`tests/node/main_stack.py`), in main's sidecar layout on main's
exporter and QEMU runtime images, leased by main's client, filled three ways in turn: by
this product under main's operator (the operator's default layout), by main's own
exporter-set controller under main's operator (which takes the pool as this product left
it), and, once docs/install.md's `node-main-operator-disable` has taken the operator's
controller away (leaving the pool alone) and the webhook is installed beside the operator
(refusing a broken set on main's CRDs), by this product installed on its own (the
release's self-signed overlay) with `layout: sidecar`, which takes on the pool main's
controller filled. Each way: a lease flashes the marker guest and boots it to its marker,
the released instance's exporter exits on the lease's end, and a successor comes up; the
three successors' Pod specs are compared.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.deploy_render import REPO
from harness.deploy_render import WEBHOOK_NAMESPACE as WEBHOOK_NS
from harness.guest import MARKER
from harness.images import product_image
from harness.jumpstarter_images import CONTROLLER_IMAGE, MAIN_EXPORTERSET_CONTROLLER_IMAGE
from harness.kubeget import find_json
from harness.node import NodeCluster
from reconciler.runtime.leader import election_id
from tests.dropin import ACCOUNT, OPERATOR_ARGS, OPERATOR_PROBES, OPERATOR_RULES, PROVISIONER
from tests.e2e.objects import get_json, wait_for
from tests.installpage import (
    NODE_MAIN_OPERATOR_DISABLE,
    NODE_MAIN_OPERATOR_WEBHOOK,
)
from tests.node.guest_support import monotonic, run_client
from tests.node.install import Install, figure
from tests.node.lab import (
    JUMPSTARTER_DEPLOYMENTS,
    LAB,
    SELECTOR,
    available,
    client,
    instances,
    online,
    pool_available,
    successor,
)
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
    pods,
)
from tests.node.support import record_figure

OWN_NODE_CLUSTER = True
pytestmark = pytest.mark.timeout(600)

ROLE, ROLE_BINDING = f"{ACCOUNT}-role", f"{ACCOUNT}-rolebinding"
BOOTS = 1  # of the marker guest, by the client's lease
READY = "ExporterSetControllersReady"  # the operator's condition on its resource
RULE_KEYS = ("apiGroups", "resources", "verbs")
# Main's CRD admits it (it has no rule for the cooldown's syntax): the webhook alone refuses it.
BROKEN = "exporterset-cooldown-not-a-duration.yaml"


@pytest.fixture(scope="module")
def installed(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Install:
    return installed_by_main_operator(node_cluster, tmp_path_factory)


@pytest.fixture(scope="module", autouse=True)
def main_images(installed: Install) -> Iterator[Future[list[str]]]:
    """Main's exporter, QEMU runtime and exporter-set controller images, built if they are
    not, imported into the node's containerd on a thread of their own while the first tests
    run (a minute of `ctr import`, which the ways would otherwise wait out)."""
    with ThreadPoolExecutor(max_workers=1) as importer:
        yield importer.submit(import_main_images, installed, controller=True)


def _condition(installed: Install, kind: str) -> dict[str, Any]:
    resource = get_json(installed.cluster, "jumpstarter", JUMPSTARTER, "-n", LAB)
    found = [c for c in (resource.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def test_the_operator_renders_a_deployment_of_this_product_unchanged_under_its_role(
    installed: Install,
) -> None:
    cluster = installed.cluster
    deployment = get_json(cluster, "deployment", ACCOUNT, "-n", LAB)
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    assert container["image"] == product_image()
    assert container["command"] == ["/exporter-set-controller"]
    assert sorted(container["args"]) == sorted([*OPERATOR_ARGS, OPERATOR_PROBES])
    (env,) = container["env"]
    assert (env["name"], env["valueFrom"]["fieldRef"]["fieldPath"]) == (
        "NAMESPACE",
        "metadata.namespace",
    )
    assert pod_spec["serviceAccountName"] == ACCOUNT
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    # The Role the loopback tests run it under is the one the operator renders.
    rules = get_json(cluster, "role", ROLE, "-n", LAB)["rules"]
    assert [{k: r.get(k) for k in RULE_KEYS} for r in rules] == OPERATOR_RULES
    binding = get_json(cluster, "rolebinding", ROLE_BINDING, "-n", LAB)
    assert binding["roleRef"]["name"] == ROLE
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [("ServiceAccount", ACCOUNT)]
    assert get_json(cluster, "serviceaccount", ACCOUNT, "-n", LAB)["metadata"]["name"] == ACCOUNT
    # It runs, passes the operator's probes, and leads.
    (pod,) = controller_pods(installed)
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] is True and status["restartCount"] == 0, status
    election = get_json(cluster, "leases.coordination.k8s.io", election_id(PROVISIONER), "-n", LAB)
    assert election["spec"]["holderIdentity"].startswith(pod["metadata"]["name"] + "_")
    # Jumpstarter's own parts, from main's image (the resource's default name).
    for name in JUMPSTARTER_DEPLOYMENTS:
        assert available(installed, LAB, name), name
        found = get_json(cluster, "deployment", name, "-n", LAB)
        assert found["spec"]["template"]["spec"]["containers"][0]["image"] == CONTROLLER_IMAGE
    ready = wait_for(
        f"the operator's {READY}",
        lambda: (c := _condition(installed, READY)).get("status") == "True" and c,
        120,
    )
    assert ready["reason"] == "AllControllersAvailable", ready


def test_a_release_client_leases_the_instance_through_main_s_controller_and_boots_a_guest(
    installed: Install, marker_guest: Path, tmp_path: Path
) -> None:
    """A new Client (`jmp admin create client`'s) leases by the pool's selector with the
    release's client (`tests/lease_client.py`): main's controller assigns the pool's
    instance, and through main's router the client flashes the marker guest, powers it on
    to its marker and releases; under ExitAndReplace its successor comes up."""
    (instance,) = instances(installed)
    name, uid = instance["metadata"]["name"], instance["metadata"]["uid"]
    config = tmp_path / "tester.yaml"
    client(installed, "tester", config)
    run = run_client(config, SELECTOR, marker_guest, BOOTS, tmp_path)
    assert run.code == 0, run.output
    assert run.first("lease acquired")["exporter"] == name, run.output
    markers = [e["line"] for e in run.events if e["event"] == "marker"]
    assert len(markers) == BOOTS and all(m.startswith(MARKER) for m in markers), run.output
    new = wait_for("the successor Online", lambda: successor(installed, uid), 300)
    wait_for("the successor Available", lambda: pool_available(installed), 300)
    flash = run.at("flashed") - run.at("flash started")
    record_figure(
        f"main's operator: lease request -> client holding it "
        f"{run.at('lease acquired') - run.at('lease requested'):.2f} s; flash "
        f"{marker_guest.stat().st_size >> 20} MiB {flash:.1f} s; power-on -> marker "
        f"{run.boot_times()}; release -> successor {new['metadata']['name']} Available "
        f"{time.monotonic() - monotonic(run.at('releasing')):.1f} s"
    )


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
    installed: Install, main_images: Future[list[str]], tmp_path: Path
) -> None:
    """Main's e2e manifest as it is, this product the operator's QEMU controller: main's
    sidecar layout (the operator's default), main's images, main's client."""
    cluster = installed.cluster
    cluster.kubectl("delete", "-f", str(REPO / "examples/node/pool/"), "--timeout=120s")
    wait_for("the node pool's instances gone", lambda: not instances(installed), 120)
    main_images.result()
    cluster.kubectl("apply", "-f", "-", input=MAIN_POOL.documents())
    session = lease_and_release(installed, MAIN_POOL, tmp_path, "main-a")
    _served(installed, "this product under main's operator", session)


def test_main_s_own_exporterset_controller_fills_the_same_pool(
    installed: Install, main_images: Future[list[str]], tmp_path: Path
) -> None:
    """The `Jumpstarter` resource's provisioner without this product's image: the operator
    runs main's own exporter-set controller (its default image, built here from main's
    Containerfile), which takes the pool this product filled as it is, and replaces a
    released instance once its exporter has exited on the lease's end."""
    cluster = installed.cluster
    (filled,) = exporters(installed, MAIN_POOL)
    main_images.result()
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


def test_disabling_the_provisioner_removes_what_the_operator_rendered_and_keeps_the_pool(
    installed: Install,
) -> None:
    """docs/install.md's `node-main-operator-disable`, main's own controller running: its
    Deployment, Role and RoleBinding go; the pool it filled stays as it was."""
    cluster = installed.cluster
    (before,) = exporters(installed, MAIN_POOL)
    (pod,) = [
        p for p in pods(installed, MAIN_POOL) if p["metadata"]["name"] == before["metadata"]["name"]
    ]
    installed.run(NODE_MAIN_OPERATOR_DISABLE)
    started = time.monotonic()

    def gone() -> bool:
        kinds = (("deployment", ACCOUNT), ("role", ROLE), ("rolebinding", ROLE_BINDING))
        return all(find_json(cluster, kind, name, "-n", LAB) is None for kind, name in kinds)

    wait_for("the Deployment, Role and RoleBinding deleted", gone, 120)
    wait_for("its Pod gone", lambda: not controller_pods(installed), 120)
    record_figure(f"main's operator: provisioner disabled -> its controller gone "
                  f"{time.monotonic() - started:.1f} s")  # fmt: skip
    # The operator keeps the ServiceAccount, as it keeps its own (exporterset.go).
    assert find_json(cluster, "serviceaccount", ACCOUNT, "-n", LAB) is not None
    # The pool is left as it was: the same Exporter, online, the same Pod.
    (after,) = exporters(installed, MAIN_POOL)
    assert after["metadata"]["uid"] == before["metadata"]["uid"] and online(after)
    (still,) = [
        p for p in pods(installed, MAIN_POOL) if p["metadata"]["name"] == after["metadata"]["name"]
    ]
    assert still["metadata"]["uid"] == pod["metadata"]["uid"]
    assert "deletionTimestamp" not in still["metadata"], still["metadata"]
    for name in JUMPSTARTER_DEPLOYMENTS:
        assert available(installed, LAB, name), name


def test_the_webhook_beside_the_operator_refuses_a_broken_set_on_main_s_crds(
    installed: Install,
) -> None:
    """docs/development.md's `node-main-operator-webhook`: this product's webhook alone,
    from the release, beside main's operator; a broken ExporterSet is refused at `kubectl
    apply` on main's CRDs, naming its field, and the pool's own set still passes."""
    cluster = installed.cluster
    started = time.monotonic()
    installed.run(NODE_MAIN_OPERATOR_WEBHOOK)
    record_figure(figure(f"docs/development.md {NODE_MAIN_OPERATOR_WEBHOOK}",
                         installed.blocks[NODE_MAIN_OPERATOR_WEBHOOK]))  # fmt: skip
    # The operator's controller is the reconciler there: the overlay brings none.
    assert find_json(cluster, "deployment", "virtualtarget-reconciler", "-n", WEBHOOK_NS) is None
    webhook = get_json(cluster, "deployment", "virtualtarget-webhook", "-n", WEBHOOK_NS)
    assert webhook["spec"]["template"]["spec"]["containers"][0]["image"].split("@")[0] == (
        product_image()
    )
    broken = yaml.safe_load_all((REPO / "examples/invalid" / BROKEN).read_text())
    (document,) = [d for d in broken if d]
    document["metadata"]["namespace"] = LAB
    refused = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(document), check=False)
    assert refused.returncode != 0, refused.stdout
    # The webhook's words (main's CRD has no rule for the cooldown), and its warning.
    assert "spec.scaleDownCooldown: Invalid value" in refused.stderr, refused.stderr
    assert "must be a non-negative Go duration" in refused.stderr
    assert 'Warning: VirtualTargetClass "qemu-x86" not found' in refused.stderr
    pool = cluster.kubectl("apply", "--dry-run=server", "-f", str(REPO / "examples/node/pool/"))
    assert "exporterset.virtualtarget.jumpstarter.dev" in pool.stdout
    record_figure(
        f"main's operator: the webhook beside it installed and refusing in "
        f"{time.monotonic() - started:.1f} s: {refused.stderr.strip().splitlines()[0][:160]}"
    )


def test_this_product_on_its_own_in_the_sidecar_layout_takes_on_main_s_pool(
    installed: Install, tmp_path: Path
) -> None:
    """With the operator's provisioner disabled, this product installed on its own (the
    release's self-signed overlay, whose webhook is already there) and the class given
    `layout: sidecar`: it takes on the pool main's controller filled, and serves it."""
    cluster = installed.cluster
    (filled,) = exporters(installed, MAIN_POOL)
    # The operator's controller is gone and the webhook is there (the two tests above):
    # the overlay's reconciler joins the webhook.
    assert not controller_pods(installed)
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
