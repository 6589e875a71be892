"""KubeVirt pools on the node (tests/node/test_kubevirt_node.py's): the target cluster, a
pool's class, and what the tests read of the VMs there.

The target cluster is the node cluster itself, reached from a namespace of its own
(`Target`): a ServiceAccount granted `kubevirt_target.kubeconfig_rules()` there and
nothing elsewhere, and the class's credentials Secret holding a kubeconfig with that
account's token. The drivers' console trusts only the system's CAs (it reads the
kubeconfig's CA under a name lightkube does not use: docs/kubevirt.md), so the Secret also
carries the cluster's CA as `ca.crt` and `SSL_CERT_FILE` naming it: the class's Secret is
the exporter's environment too, and Python's default TLS context reads that variable.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.provisioners.kubevirt import KUBEVIRT_EXPORTER_IMAGE, PROVISIONER
from harness.images import build_kubevirt_exporter
from harness.kubevirt_build import NAMESPACE, marker_containerdisk
from harness.kubevirt_install import KubeVirtInstall, install, remove
from harness.node import NodeCluster
from pool.model.keys import INSTANCE_LABEL
from pool.rendering.provisioners.kubevirt import CREDENTIALS_DIR, KUBECONFIG_KEY
from pool.rendering.provisioners.kubevirt_target import kubeconfig_rules
from tests.e2e.objects import apply, get_json

__all__ = [
    "ACCOUNT",
    "SECRET",
    "Target",
    "guest_disk",
    "kubevirt_class_spec",
    "kubevirt_ready",
    "make_target",
]

Obj = dict[str, Any]
ACCOUNT = "jumpstarter-kubevirt"
SECRET = "kubevirt-credentials"
IMAGES = {"exporter": {"image": KUBEVIRT_EXPORTER_IMAGE}}


def kubevirt_ready(cluster: NodeCluster) -> KubeVirtInstall:
    """KubeVirt installed on `cluster`, and what its pools run imported into the node: the
    KubeVirt exporter image (`make image`) and the marker guest's containerDisk (its name:
    `guest_disk()`). Each import is the node's once (`NodeCluster.import_image`)."""
    installed = install(cluster)
    started = time.monotonic()
    try:
        cluster.import_image(build_kubevirt_exporter(), KUBEVIRT_EXPORTER_IMAGE)
        archive, disk = marker_containerdisk()
        cluster.import_image(archive, disk)
    except BaseException:
        remove(installed)  # nothing would use it, and the host is as it was
        raise
    installed.timings["pool images imported"] = round(time.monotonic() - started, 1)
    return installed


def guest_disk() -> str:
    """The name of the marker guest's containerDisk, the pools' VMs' disk."""
    return marker_containerdisk()[1]


@dataclass(frozen=True)
class Target:
    cluster: Any
    namespace: str  # where the VMs and Services are made

    def machines(self) -> dict[str, Obj]:
        """The VMs there, not being deleted, by name."""
        items = get_json(self.cluster, "virtualmachines.kubevirt.io", "-n", self.namespace)
        return {
            vm["metadata"]["name"]: vm
            for vm in items["items"]
            if "deletionTimestamp" not in vm["metadata"]
        }

    def services(self) -> list[str]:
        items = get_json(self.cluster, "services", "-n", self.namespace)["items"]
        return sorted(s["metadata"]["name"] for s in items)

    def of(self, instance: str) -> Obj | None:
        """The VM labelled for `instance`."""
        return next(
            (
                vm
                for vm in self.machines().values()
                if vm["metadata"]["labels"].get(INSTANCE_LABEL) == instance
            ),
            None,
        )

    def describe(self) -> str:
        """What a failed test shows of the target: its VMs, VMIs (phase, node) and Pods,
        its Events in order (a VMI that never ran says why here: scheduling, the
        launcher's image, its volumes), and the last of the logs of the launchers'
        `compute` containers and of virt-handler (a VMI defined but never started)."""
        where = ("-n", self.namespace)
        launchers = ("-l", "kubevirt.io=virt-launcher", "-c", "compute", "--prefix")
        shown = [
            self.cluster.kubectl(*command, check=False)
            for command in (
                ("get", "virtualmachines.kubevirt.io,virtualmachineinstances.kubevirt.io,pods",
                 "-o", "wide", *where),
                ("get", "events", "--sort-by=.lastTimestamp", *where),
                ("logs", *launchers, "--tail=40", *where),
                ("logs", "-n", NAMESPACE, "daemonset/virt-handler", "--tail=60"),
            )
        ]  # fmt: skip
        return "\n".join([f"target {self.namespace}:", *(r.stdout + r.stderr for r in shown)])


def make_target(cluster: Any, pool_namespace: str) -> Target:
    """A namespace standing for the target cluster, and the credentials Secret in
    `pool_namespace` that reaches it."""
    there = f"vms-{secrets.token_hex(4)}"
    cluster.kubectl("create", "namespace", there)
    cluster.kubectl("create", "serviceaccount", ACCOUNT, "-n", there)
    rbac = "rbac.authorization.k8s.io"
    role = {
        "apiVersion": f"{rbac}/v1",
        "kind": "Role",
        "metadata": {"name": ACCOUNT, "namespace": there},
        "rules": kubeconfig_rules(),
    }
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ACCOUNT, "namespace": there},
        "roleRef": {"apiGroup": rbac, "kind": "Role", "name": ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": there}],
    }
    apply(cluster, role, binding)
    ca = Path(cluster.plane.ca_file).read_bytes()
    token = cluster.kubectl("create", "token", ACCOUNT, "-n", there, "--duration=2h").stdout
    data = {
        KUBECONFIG_KEY: _kubeconfig(cluster.plane.server, ca, token.strip()).encode(),
        "ca.crt": ca,
        "SSL_CERT_FILE": f"{CREDENTIALS_DIR}/ca.crt".encode(),
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": pool_namespace},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(secret))
    return Target(cluster, there)


def _kubeconfig(server: str, ca: bytes, token: str) -> str:
    """A kubeconfig that holds all it needs (the Pod has none of this host's files)."""
    cluster = {"server": server, "certificate-authority-data": base64.b64encode(ca).decode()}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "target", "cluster": cluster}],
            "users": [{"name": ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": "target", "context": {"cluster": "target", "user": ACCOUNT}}],
            "current-context": "target",
        }
    )


def kubevirt_class_spec(**spec: Any) -> Obj:
    """The class's fields beside its parameters: the provisioner and its Secret."""
    return {"provisioner": PROVISIONER, "credentialsSecretRef": {"name": SECRET}, **spec}
