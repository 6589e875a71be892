"""kube-apiserver accepts the guest's disk as the reconciler renders it, in both layouts and
both kinds of volume (a sized emptyDir with the ephemeral storage it reserves, a generic
ephemeral volume with its claim template and fsGroup), under the Pod Security level each
layout's namespace enforces, and stores every size exactly as it was sent: the sizes are
spelled as resource.Quantity prints them, so what the pool writes is what it reads back
(a claim template gains only the apiserver's defaults: empty metadata, `volumeMode:
Filesystem`).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from tests.instance_pods import instance_pod

LEVELS = {"exporter": "restricted", "sidecar": "baseline"}
STORAGE = {
    "defaults": {},
    "emptyDir": {"storage": {"size": "1Gi", "fsOverhead": "15%"}},
    "claim": {
        "storage": {
            "size": "20Gi",
            "storageClassName": "local-disks",
            "accessModes": ["ReadWriteOncePod"],
        }
    },
    "legacy": {"resources": {"storage": "16Gi"}},
}


def _stored(plane: ControlPlane, layout: str, parameters: dict[str, Any]) -> dict[str, Any]:
    level = LEVELS[layout]
    ns = f"disk-{layout}-{secrets.token_hex(3)}"
    plane.kubectl("create", "namespace", ns)
    plane.kubectl("label", "namespace", ns, f"pod-security.kubernetes.io/enforce={level}")
    pod = instance_pod(ns, layout=layout, parameters=parameters)
    done = plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod), check=False
    )
    assert (done.returncode, done.stderr) == (0, ""), json.dumps(pod["spec"], indent=1)
    stored: dict[str, Any] = json.loads(done.stdout)
    return {"sent": pod, "stored": stored}


def _disk_parts(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    return {
        "volume": next(v for v in spec["volumes"] if v["name"] == "disk"),
        "resources": {c["name"]: c.get("resources", {}) for c in containers},
        "fsGroup": (spec.get("securityContext") or {}).get("fsGroup"),
    }


@pytest.mark.parametrize("storage", sorted(STORAGE))
@pytest.mark.parametrize("layout", sorted(LEVELS))
def test_the_apiserver_stores_the_disk_as_rendered(
    control_plane: ControlPlane, layout: str, storage: str
) -> None:
    pods = _stored(control_plane, layout, STORAGE[storage])
    stored, sent = _disk_parts(pods["stored"]), _disk_parts(pods["sent"])
    template = stored["volume"].get("ephemeral", {}).get("volumeClaimTemplate")
    if template is not None:  # what the apiserver's defaulting adds to a claim template
        assert template.pop("metadata") == {}
        assert template["spec"].pop("volumeMode") == "Filesystem"
    assert stored == sent
