"""The Pod Security level instance namespaces need, asked of kube-apiserver's own Pod
Security admission, for the Pod the reconciler renders with /dev/kvm given through a
device plugin's resource, as a class would ask for it. The default layout (QEMU in the
exporter's container) is admitted under `restricted`; Jumpstarter main's `sidecar` layout
is admitted where the namespace enforces `baseline`, and refused under `restricted` for
the runtime sidecar's root user alone. kubectl's text is pinned.
"""

from __future__ import annotations

import json
import secrets

from harness.controlplane import ControlPlane
from tests.instance_pods import EXPORTER, instance_pod

# The resource KubeVirt's KVM device plugin advertises for /dev/kvm.
KVM = "devices.kubevirt.io/kvm"


def rendered_pod(ns: str, layout: str) -> dict[str, object]:
    scheduling = {"resources": {"limits": {KVM: "1", "memory": "2Gi"}}}
    return instance_pod(ns, layout=layout, scheduling=scheduling)


def create_under(plane: ControlPlane, level: str, layout: str) -> tuple[int, str]:
    ns = f"psa-{level}-{secrets.token_hex(3)}"
    plane.kubectl("create", "namespace", ns)
    plane.kubectl("label", "namespace", ns, f"pod-security.kubernetes.io/enforce={level}")
    pod = json.dumps(rendered_pod(ns, layout))
    done = plane.kubectl("create", "--dry-run=server", "-f", "-", input=pod, check=False)
    return done.returncode, done.stderr


def test_the_default_layouts_pods_meet_restricted(control_plane: ControlPlane) -> None:
    assert create_under(control_plane, "restricted", "exporter") == (0, "")


def test_sidecar_layout_pods_meet_baseline(control_plane: ControlPlane) -> None:
    assert create_under(control_plane, "baseline", "sidecar") == (0, "")


def test_restricted_refuses_only_the_runtime_sidecars_root(control_plane: ControlPlane) -> None:
    code, stderr = create_under(control_plane, "restricted", "sidecar")
    assert code == 1
    runtime = 'container "target-runtime"'
    assert stderr == (
        f'Error from server (Forbidden): error when creating "STDIN": pods "{EXPORTER}" is '
        'forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        f"({runtime} must set securityContext.allowPrivilegeEscalation=false), unrestricted "
        f'capabilities ({runtime} must set securityContext.capabilities.drop=["ALL"]), '
        f"runAsNonRoot != true ({runtime} must not set securityContext.runAsNonRoot=false), "
        f"runAsUser=0 ({runtime} must not set runAsUser=0), seccompProfile (pod or {runtime} "
        'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")\n'
    )
