"""A `kubevirt.jumpstarter.dev` pool against a real kube-apiserver: the reconciler reaches
the target cluster with the kubeconfig of the class's credentials Secret (a
ServiceAccount token limited to `kubeconfig_rules()`, in a namespace of its own, as a
target cluster would grant it), creates each instance's VirtualMachine and Services there
before its Pod, replaces an instance whose VM is gone, and removes what a removed
instance or a deleted set leaves there.

KubeVirt's own VirtualMachine CRD (virt-operator's, built from KubeVirt's module:
`harness.kubevirt_crds`) is what the apiserver stores the VMs by; no KubeVirt runs here
(tests/node runs it), so the VMs stay as created and the Pods are never scheduled.
Jumpstarter's 0.9.0 controller issues the instances' credentials (`ns`).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.controlplane import ControlPlane
from harness.kubevirt_crds import crds
from harness.stack import running_reconciler
from pool.model.keys import INSTANCE_LABEL, NAME_LABEL, SET_LABEL, SET_NAMESPACE_LABEL
from pool.rendering.provisioners.kubevirt_target import kubeconfig_rules
from reconciler.runtime.remotecleanup import FINALIZER
from tests.e2e.objects import apply, exporter_set, get_json, set_status, wait_for
from tests.e2e.test_plan_e2e import plan
from tests.e2e.test_reconciler_e2e import Reconciler, names

PROVISIONER = "kubevirt.jumpstarter.dev"
ACCOUNT = "jumpstarter-kubevirt"  # the target's ServiceAccount the kubeconfig acts as
SECRET = "kubevirt-credentials"


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> ControlPlane:
    """The session's plane, with KubeVirt's VirtualMachine CRD (its VMI CRD stays the one
    generated here, which tests/e2e/test_kubevirt_e2e.py checks)."""
    machine = crds()[0]
    control_plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(machine))
    name = machine["metadata"]["name"]
    # (polled: `kubectl wait` fails outright on a CRD whose status has no conditions yet)
    wait_for("KubeVirt's VirtualMachine CRD established", lambda: _established(control_plane, name))
    return control_plane


def _established(plane: ControlPlane, crd: str) -> bool:
    conditions = get_json(plane, "crd", crd).get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


@pytest.fixture
def target(plane: ControlPlane, ns: str, tmp_path: Path) -> str:
    """A namespace standing for the target cluster, its ServiceAccount granted
    `kubeconfig_rules()` there and nothing elsewhere, and the class's Secret in `ns`
    holding a kubeconfig with that account's token."""
    there = f"vms-{secrets.token_hex(4)}"
    plane.kubectl("create", "namespace", there)
    plane.kubectl("create", "serviceaccount", ACCOUNT, "-n", there)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ACCOUNT, "namespace": there},
        "rules": kubeconfig_rules(),
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ACCOUNT, "namespace": there},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": there}],
    }
    apply(plane, role, binding)
    kubeconfig = plane.service_account_kubeconfig(there, ACCOUNT, tmp_path / "target.kubeconfig")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": ns},
        "data": {"kubeconfig": base64.b64encode(kubeconfig.read_bytes()).decode()},
    }
    apply(plane, secret)
    return there


@pytest.fixture
def start(plane: ControlPlane, ns: str, tmp_path: Path) -> Iterator[Callable[[], Reconciler]]:
    started: list[Reconciler] = []

    def run() -> Reconciler:
        log = tmp_path / f"reconciler-{len(started)}.log"
        started.append(Reconciler(plane, ns, log, f"--provisioner={PROVISIONER}"))
        return started[-1]

    yield run
    for reconciler in started:
        reconciler.stop()


def make_pool(plane: ControlPlane, ns: str, there: str, **spec: Any) -> None:
    klass = {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "VirtualTargetClass",
        "metadata": {"name": "kubevirt", "namespace": ns},
        "spec": {
            "provisioner": PROVISIONER,
            "credentialsSecretRef": {"name": SECRET},
            "parameters": {
                "namespace": there,
                "image": "localhost/marker-containerdisk:x86_64",
                "resources": {"cpu": 1, "memory": "128Mi"},
                "sshAccess": "NodePort",
            },
        },
    }
    pool = exporter_set(
        "pool", ns, class_name="kubevirt", labels={"board": "vm"}, with_template=True, **spec
    )
    apply(plane, klass, pool)


def machines(plane: ControlPlane, there: str) -> dict[str, dict[str, Any]]:
    items = get_json(plane, "virtualmachines.kubevirt.io", "-n", there)["items"]
    return {vm["metadata"]["name"]: vm for vm in items if "deletionTimestamp" not in vm["metadata"]}


def services(plane: ControlPlane, there: str) -> list[str]:
    return sorted(s["metadata"]["name"] for s in get_json(plane, "services", "-n", there)["items"])


def test_each_instance_has_its_vm_and_service_on_the_target_and_a_lost_vm_is_replaced(
    plane: ControlPlane, ns: str, target: str, start: Callable[[], Reconciler]
) -> None:
    make_pool(plane, ns, target, minAvailableReplicas=2, maxReplicas=2)
    start()
    pair = wait_for("two VMs, one per instance", lambda: len(machines(plane, target)) == 2)
    assert pair
    vms = machines(plane, target)
    assert sorted(vms) == names(plane, ns)  # each named after its Exporter
    for name, vm in vms.items():
        assert vm["spec"]["runStrategy"] == "Halted"  # the power driver's `on` starts it
        assert vm["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "jumpstarter",
            "jumpstarter.dev/exporter": name,
            "jumpstarter.dev/provisioner": PROVISIONER,
            SET_NAMESPACE_LABEL: ns,
            NAME_LABEL: "pool",
            INSTANCE_LABEL: name,
        }
        volume = vm["spec"]["template"]["spec"]["volumes"][0]
        assert volume["containerDisk"]["image"] == "localhost/marker-containerdisk:x86_64"
    wait_for(
        "an ssh Service each", lambda: services(plane, target) == sorted(f"{n}-ssh" for n in vms)
    )
    for name in vms:
        service = get_json(plane, "service", f"{name}-ssh", "-n", target)
        owner = service["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "VirtualMachine",
            name,
            vms[name]["metadata"]["uid"],
        )
        assert service["spec"]["type"] == "NodePort"
        # The exporter's drivers: the three that drive the VM, and `ssh` at the Service's
        # address (its ClusterIP at its node port, as #927 resolves it).
        config = get_json(plane, "secret", f"exporter-config-{name}", "-n", ns)
        export = yaml.safe_load(base64.b64decode(config["data"]["config.yaml"]))["export"]
        assert [(d, e["type"]) for d, e in export.items()] == [
            ("power", "jumpstarter_driver_kubevirt.driver.KubevirtPower"),
            ("console", "jumpstarter_driver_kubevirt.driver.KubevirtConsole"),
            ("storage", "jumpstarter_driver_kubevirt.driver.KubevirtStorage"),
            ("ssh", "jumpstarter_driver_network.driver.TcpNetwork"),
        ]
        address = {
            "host": service["spec"]["clusterIP"],
            "port": service["spec"]["ports"][0]["nodePort"],
        }
        assert export["ssh"]["config"] == address
        assert export["power"]["config"] == {
            "kubeconfig": "/etc/jumpstarter/kubevirt/kubeconfig",
            "namespace": target,
            "vm_name": name,
        }
        pod = get_json(plane, "pod", name, "-n", ns)
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        assert {
            "name": "kubevirt-credentials",
            "mountPath": "/etc/jumpstarter/kubevirt",
            "readOnly": True,
        } in mounts

    # `virtualtarget plan` names each instance's VM and Service there.
    result = plan(plane, "-n", ns, "-o", "json", f"--provisioner={PROVISIONER}", "pool")
    assert result.returncode == 0, result.stderr
    (entry,) = json.loads(result.stdout)["sets"]
    assert sorted((o["instance"], o["kind"], o["name"]) for o in entry["targetObjects"]) == sorted(
        [(n, "VirtualMachine", n) for n in vms] + [(n, "Service", f"{n}-ssh") for n in vms]
    )
    assert {o["target"] for o in entry["targetObjects"]} == {f"{ns}/{SECRET}"}

    # A VM deleted on the target: its instance failed, replaced with a new VM.
    lost = sorted(vms)[0]
    plane.kubectl("delete", "virtualmachines.kubevirt.io", lost, "-n", target, "--wait=false")
    wait_for("the lost VM's instance replaced", lambda: lost not in names(plane, ns), timeout=90)
    fresh = wait_for(
        "two VMs again",
        lambda: len(m := machines(plane, target)) == 2 and lost not in m and sorted(m),
        timeout=90,
    )
    assert fresh == names(plane, ns)
    status = set_status(plane, ns)
    assert status.get("replicas") == 2

    # The set deleted: every VM and Service of it goes from the target. (Its Exporters
    # deleted here as the garbage collector would: no kube-controller-manager runs on
    # loopback; tests/node has one.)
    plane.kubectl("delete", "exporterset", "pool", "-n", ns, "--wait=false")
    plane.kubectl("delete", "exporters", "-n", ns, "-l", f"{SET_LABEL}=pool", "--wait=false")
    wait_for("no VM left", lambda: not machines(plane, target), timeout=90)
    wait_for("no Service left", lambda: not services(plane, target), timeout=90)


def _degraded(plane: ControlPlane, ns: str, saying: str) -> dict[str, Any] | None:
    """The set's Degraded condition while True and its message says `saying`."""
    return next(
        (
            c
            for c in set_status(plane, ns).get("conditions", [])
            if c["type"] == "Degraded" and c["status"] == "True" and saying in c["message"]
        ),
        None,
    )


def test_a_missing_or_keyless_credentials_secret_is_reported_until_it_is_fixed(
    plane: ControlPlane, ns: str, target: str, start: Callable[[], Reconciler]
) -> None:
    """The Secret missing, then without its `kubeconfig` key: `Degraded` `TargetFailed`
    names it and the key, and nothing is made; given the key, the same reconciler makes
    the instance and the condition clears."""
    good = get_json(plane, "secret", SECRET, "-n", ns)
    plane.kubectl("delete", "secret", SECRET, "-n", ns)
    make_pool(plane, ns, target, minAvailableReplicas=1, maxReplicas=1)
    start()
    missing = f'credentials Secret {ns}/{SECRET} not found (its key "kubeconfig" must hold'
    degraded = wait_for("Degraded with the Secret named", lambda: _degraded(plane, ns, missing))
    assert degraded["reason"] == "TargetFailed"
    assert not get_json(plane, "pods", "-n", ns)["items"]

    keyless = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": ns}}
    apply(plane, {**keyless, "data": {"token": base64.b64encode(b"x").decode()}})
    no_key = f'credentials Secret {ns}/{SECRET} has no key "kubeconfig"'
    degraded = wait_for("Degraded with the key named", lambda: _degraded(plane, ns, no_key))
    assert degraded["reason"] == "TargetFailed"
    assert not get_json(plane, "pods", "-n", ns)["items"] and not machines(plane, target)

    apply(plane, {**keyless, "data": good["data"]})
    wait_for("the instance's VM", lambda: machines(plane, target), timeout=90)
    wait_for(
        "Degraded cleared",
        lambda: any(
            c["type"] == "Degraded" and c["status"] == "False"
            for c in set_status(plane, ns).get("conditions", [])
        ),
        timeout=90,
    )


def test_cluster_wide_a_deleted_set_is_held_until_its_vms_are_gone(
    plane: ControlPlane, ns: str, target: str, tmp_path: Path
) -> None:
    """Where the install may write sets (cluster-wide), each KubeVirt set carries #927's
    finalizer: deleted, it stays until its instances' VMs are deleted, even with no
    garbage collector to delete its Exporters first."""
    make_pool(plane, ns, target, minAvailableReplicas=1, maxReplicas=1)
    extra = [
        f"--provisioner={PROVISIONER}",
        f"--leader-election-namespace={ns}",
        "--leader-election-id=kubevirt-cluster-wide",
    ]
    with running_reconciler(plane, tmp_path, extra=extra):
        wait_for("a VM", lambda: len(machines(plane, target)) == 1)
        finalizers = get_json(plane, "exporterset", "pool", "-n", ns)["metadata"]["finalizers"]
        assert finalizers == [FINALIZER]
        plane.kubectl("delete", "exporterset", "pool", "-n", ns, "--wait=false")
        wait_for("the set gone", lambda: not _exists(plane, "exporterset", "pool", ns))
        assert not machines(plane, target)
        wait_for("no Service left", lambda: not services(plane, target))
        assert names(plane, ns)  # the Exporters: no garbage collector runs here


def _exists(plane: ControlPlane, kind: str, name: str, namespace: str) -> bool:
    return plane.kubectl("get", kind, name, "-n", namespace, check=False).returncode == 0
