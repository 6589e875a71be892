"""This product as Jumpstarter main's operator runs it, for the tests and benchmarks that
run it on a loopback control plane: the operator's arguments, its Role's rules and the
names of what it renders for a provisioner (controller/deploy/operator/internal/
controller/jumpstarter/exporterset.go at main's b1f2bb4: `createExporterSetDeployment`,
`exporterSetPolicyRules`). tests/node/test_main_operator.py runs the real operator and
checks that what it renders is this, word for word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.stack import ChildProcess
from tests.e2e.objects import apply

__all__ = [
    "ACCOUNT",
    "OPERATOR_ARGS",
    "OPERATOR_PROBES",
    "OPERATOR_RULES",
    "PROVISIONER",
    "operator_account",
    "operators_kubeconfig",
    "ours_dropped_in",
]

PROVISIONER = "qemu.jumpstarter.dev"
# `<cr>-exporterset-<provisioner, dots as dashes>`, the CR being `jumpstarter`: the
# ServiceAccount and the Deployment; the Role and RoleBinding add `-role`, `-rolebinding`.
ACCOUNT = "jumpstarter-exporterset-qemu-jumpstarter-dev"
OPERATOR_PROBES = "--health-probe-bind-address=:8081"  # loopback runs take a free port
# The operator's arguments, its probe address apart.
OPERATOR_ARGS = [
    f"--provisioner={PROVISIONER}",
    "--leader-elect",
    "--metrics-bind-address=0",
]
_ALL = ["get", "list", "watch", "create", "update", "patch", "delete"]
OPERATOR_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["virtualtarget.jumpstarter.dev"],
        "resources": ["exportersets"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["virtualtarget.jumpstarter.dev"],
        "resources": ["exportersets/status", "exportersets/scale"],
        "verbs": ["get", "update", "patch"],
    },
    {
        "apiGroups": ["virtualtarget.jumpstarter.dev"],
        "resources": ["exportersets/finalizers"],
        "verbs": ["update"],
    },
    {
        "apiGroups": ["virtualtarget.jumpstarter.dev"],
        "resources": ["virtualtargetclasses"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": ["jumpstarter.dev"], "resources": ["exporters"], "verbs": _ALL},
    {"apiGroups": ["jumpstarter.dev"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": _ALL},
]


def operator_account(plane: ControlPlane, namespace: str, path: Path) -> Path:
    """The ServiceAccount, Role and RoleBinding the operator makes; a kubeconfig with a
    token of that account."""
    meta = {"name": ACCOUNT, "namespace": namespace}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT}
    subject = {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}
    rbac = "rbac.authorization.k8s.io/v1"
    apply(
        plane,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": rbac, "kind": "Role", "metadata": meta, "rules": OPERATOR_RULES},
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": role_ref,
            "subjects": [subject],
        },
    )
    return plane.service_account_kubeconfig(namespace, ACCOUNT, path)


def operators_kubeconfig(plane: ControlPlane, ns: str, tmp_path: Path) -> Path:
    """The operator's ServiceAccount and Role for the provisioner (made once)."""
    path = tmp_path / "operator.kubeconfig"
    return path if path.exists() else operator_account(plane, ns, path)


def ours_dropped_in(plane: ControlPlane, ns: str, tmp_path: Path) -> ChildProcess:
    """This product as Jumpstarter's operator runs it: `exporter-set-controller`, the
    operator's arguments and Role, `NAMESPACE`."""
    return ChildProcess.start(
        "exporter-set-controller",
        [*OPERATOR_ARGS, "--health-probe-bind-address=127.0.0.1:0"],
        tmp_path,
        module="reconciler.exporter_set_controller",
        env={"NAMESPACE": ns, "KUBECONFIG": str(operators_kubeconfig(plane, ns, tmp_path))},
    )
