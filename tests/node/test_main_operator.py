"""Jumpstarter main's operator runs this product as its QEMU exporter-set controller.

On a cluster of its own, docs/development.md's `node-main-operator` block as written: main's
operator, controller and router, built here from main's source, main's operator installed
from its `config/default`, then a `Jumpstarter` resource (examples/node/jumpstarter-main.yaml)
whose `spec.exporterSets.provisioners` names `qemu.jumpstarter.dev` with this product's
image, then the node pool. What the operator renders for the provisioner
(`createExporterSetDeployment`, `exporterSetPolicyRules` of its exporterset.go) runs this
product unchanged; a 0.9.0 client leases the pool's instance through main's controller,
boots the marker guest on it through main's router and releases it, and the successor comes
up; docs/install.md's
`node-main-operator-disable` takes the controller away and leaves the pool alone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.deploy_render import REPO
from harness.deploy_render import WEBHOOK_NAMESPACE as WEBHOOK_NS
from harness.guest import MARKER
from harness.images import product_image
from harness.jumpstarter_images import CONTROLLER_IMAGE
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
    owned_by,
    pool_available,
    successor,
)
from tests.node.main_stack import (
    JUMPSTARTER,
    controller_pods,
    installed_by_main_operator,
)
from tests.node.support import record_figure

OWN_NODE_CLUSTER = True

ROLE, ROLE_BINDING = f"{ACCOUNT}-role", f"{ACCOUNT}-rolebinding"
BOOTS = 1  # of the marker guest, by the client's lease
READY = "ExporterSetControllersReady"  # the operator's condition on its resource
RULE_KEYS = ("apiGroups", "resources", "verbs")
# Main's CRD admits it (it has no rule for the cooldown's syntax): the webhook alone refuses it.
BROKEN = "exporterset-cooldown-not-a-duration.yaml"


@pytest.fixture(scope="module")
def installed(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Install:
    return installed_by_main_operator(node_cluster, tmp_path_factory)


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


def test_disabling_the_provisioner_removes_what_the_operator_rendered_and_keeps_the_pool(
    installed: Install,
) -> None:
    cluster = installed.cluster
    (before,) = instances(installed)
    (pod,) = owned_by(installed, "pods", before["metadata"]["uid"])
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
    (after,) = instances(installed)
    assert after["metadata"]["uid"] == before["metadata"]["uid"] and online(after)
    (still,) = owned_by(installed, "pods", after["metadata"]["uid"])
    assert still["metadata"]["uid"] == pod["metadata"]["uid"]
    assert "deletionTimestamp" not in still["metadata"], still["metadata"]
    for name in JUMPSTARTER_DEPLOYMENTS:
        assert available(installed, LAB, name), name
