"""The Pod Security level of a rendered instance Pod (`qemu.POD_SECURITY_LEVEL`), decided
by kube-apiserver's own PodSecurity admission (on by default).

The reconciler's Pods are admitted in a namespace that enforces that level; the same Pod
sent to a namespace enforcing the next level, `restricted`, is refused for its root
runtime sidecar. The node tier runs its instance Pods in namespaces enforcing the level.
"""

from __future__ import annotations

import json
import secrets
import threading
from pathlib import Path

from reconciler.provisioners.qemu import POD_SECURITY_LEVEL
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class, wait_for
from virtualtarget.controlplane import ControlPlane
from virtualtarget.stack import running_reconciler
from virtualtarget.standin import CredentialStandIn

ENFORCE = "pod-security.kubernetes.io/enforce"


def _namespace(plane: ControlPlane, level: str) -> str:
    name = f"psa-{level}-{secrets.token_hex(3)}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    body["metadata"]["labels"] = {ENFORCE: level, f"{ENFORCE}-version": "latest"}
    plane.kubectl("apply", "-f", "-", input=json.dumps(body))
    return name


def test_instance_pods_meet_their_pod_security_level_and_not_restricted(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = control_plane
    ns = _namespace(plane, POD_SECURITY_LEVEL)
    stop = threading.Event()
    standin = CredentialStandIn(plane.api_client(), namespace=ns, interval=0.2)
    threading.Thread(target=standin.run, args=(stop,), daemon=True).start()
    apply(plane, virtual_target_class("qemu", ns))
    apply(plane, exporter_set("pool", ns, class_name="qemu", with_template=True, minReplicas=1))
    try:
        with running_reconciler(
            plane, tmp_path, extra=["--namespace", ns, "--no-leader-election"]
        ) as reconciler:
            (pod,) = wait_for(
                "the instance Pod", lambda: get_json(plane, "pods", "-n", ns)["items"]
            )
            reconciler.check_alive()
    finally:
        stop.set()
    restricted = _namespace(plane, "restricted")
    copy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "instance-copy", "namespace": restricted},
        "spec": pod["spec"],
    }
    refused = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(copy), check=False
    )
    print(f"\nrestricted refuses the instance Pod: {refused.stderr.strip()}")
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr
    assert 'container "target-runtime" must not set runAsUser=0' in refused.stderr
    copy["metadata"]["namespace"] = ns
    admitted = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(copy), check=False
    )
    assert admitted.returncode == 0, admitted.stderr
