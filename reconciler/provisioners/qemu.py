"""`qemu.jumpstarter.dev`: one QEMU virtual machine per instance, in one Pod.

The Pod has two containers: the Jumpstarter exporter, which registers as the
instance's Exporter and serves leases, and the QEMU runtime sidecar that runs the
guest the exporter's QEMU driver controls. They share the disk volume (an emptyDir sized
by `diskSize`) and a socket directory. The default images are a fact of this plug-in;
a class, then a set, may override them.

ExitAndReplace renders `restartPolicy: Never` (the exporter exits after its lease and
the instance is replaced); InPlaceReuse renders `Always` (the exporter restarts in the
same Pod and returns to the pool). Parameters are checked with the shared parameter
model (`api.provisioners.qemu.QemuParameters`) the webhook also uses. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from api.provisioners.qemu import PROVISIONER, QemuParameters
from reconciler.access import EXPORTERS, PODS
from reconciler.keys import INSTANCE_LABEL
from reconciler.observe import RecycleStrategy
from reconciler.render import Image, InstanceContext

__all__ = ["DEFAULT_IMAGES", "QemuProvisioner"]

DEFAULT_IMAGES: Mapping[str, Image] = {
    "exporter": Image("quay.io/jumpstarter-dev/jumpstarter:0.7.1", "IfNotPresent"),
    "runtime": Image("quay.io/jumpstarter-dev/qemu-runtime:0.7.1", "IfNotPresent"),
}

_CA_DIR = "/etc/jumpstarter/ca"
_CREDENTIALS_DIR = "/etc/jumpstarter/credentials"
_SHARED = "/var/lib/jumpstarter"


def _container(name: str, image: Image, **fields: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image.image, **fields}
    if image.pull_policy:
        container["imagePullPolicy"] = image.pull_policy
    return container


def _flatten(node: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for key in sorted(node):
        value = node[key]
        if isinstance(value, Mapping):
            pairs += _flatten(value, f"{prefix}{key}.")
        else:
            pairs.append((f"{prefix}{key}", value))
    return pairs


class QemuProvisioner:
    name = PROVISIONER
    default_images = DEFAULT_IMAGES

    def parameter_errors(self, parameters: Mapping[str, Any]) -> list[str]:
        try:
            QemuParameters.model_validate(parameters)
        except ValidationError as exc:
            return [
                f"spec.parameters.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                if e["loc"]
                else f"spec.parameters: {e['msg']}"
                for e in exc.errors()
            ]
        return []

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        params = QemuParameters.model_validate(ctx.parameters).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        mounts: list[dict[str, Any]] = [{"name": "shared", "mountPath": _SHARED}]
        shared: dict[str, Any] = {}
        disk = params.get("disk")
        size = disk.get("size") if isinstance(disk, dict) else params.get("diskSize")
        if size:
            shared["sizeLimit"] = size
        volumes: list[dict[str, Any]] = [{"name": "shared", "emptyDir": shared}]
        env = [
            {"name": "JUMPSTARTER_EXPORTER", "value": ctx.exporter},
            {"name": "JUMPSTARTER_NAMESPACE", "value": ctx.namespace},
            {"name": "JUMPSTARTER_DRIVERS", "value": json.dumps(ctx.drivers, sort_keys=True)},
            {"name": "JUMPSTARTER_QEMU_SOCKET", "value": f"{_SHARED}/qemu.sock"},
        ]
        if ctx.ca_bundle is not None:
            config_map, key = ctx.ca_bundle
            volumes.append(
                {
                    "name": "ca-bundle",
                    "configMap": {"name": config_map, "items": [{"key": key, "path": key}]},
                }
            )
            mounts.append({"name": "ca-bundle", "mountPath": _CA_DIR, "readOnly": True})
            env.append({"name": "SSL_CERT_FILE", "value": f"{_CA_DIR}/{key}"})
        exporter_mounts = list(mounts)
        if ctx.credentials_secret:
            volumes.append(
                {"name": "credentials", "secret": {"secretName": ctx.credentials_secret}}
            )
            exporter_mounts.append(
                {"name": "credentials", "mountPath": _CREDENTIALS_DIR, "readOnly": True}
            )
        # Every validated parameter, defaults included, as `--name=value` (nested: a.b).
        qemu_args = [*(f"--{k}={v}" for k, v in _flatten(params)), f"--socket={_SHARED}/qemu.sock"]
        runtime: dict[str, Any] = _container(
            "qemu", ctx.images["runtime"], args=qemu_args, volumeMounts=mounts
        )
        if ctx.resources:
            runtime["resources"] = dict(ctx.resources)
        spec: dict[str, Any] = {
            "restartPolicy": (
                "Never" if ctx.recycle == RecycleStrategy.EXIT_AND_REPLACE else "Always"
            ),
            "containers": [
                _container(
                    "exporter", ctx.images["exporter"], env=env, volumeMounts=exporter_mounts
                ),
                runtime,
            ],
            "volumes": volumes,
        }
        if ctx.node_selector:
            spec["nodeSelector"] = dict(ctx.node_selector)
        if ctx.tolerations:
            spec["tolerations"] = list(ctx.tolerations)
        return {
            "apiVersion": PODS.api_version,
            "kind": PODS.kind,
            "metadata": {
                "name": ctx.exporter,
                "namespace": ctx.namespace,
                "labels": {**ctx.labels, INSTANCE_LABEL: ctx.exporter},
                "ownerReferences": [
                    {
                        "apiVersion": EXPORTERS.api_version,
                        "kind": EXPORTERS.kind,
                        "name": ctx.exporter,
                        "uid": ctx.exporter_uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }
