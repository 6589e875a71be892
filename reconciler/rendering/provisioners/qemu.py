"""`qemu.jumpstarter.dev`: one QEMU virtual machine per instance, rendered as Jumpstarter's
own exporter-set controller renders it (DESIGN §7).

Drivers: each `jumpstarter_driver_qemu.driver.Qemu` of the template is pointed at the
runtime sidecar's launcher socket and gets the guest's size from the parameters where
its own config is silent; a `tcp` TcpNetwork driver to the guest's forwarded SSH port is
added when the template has none.

The Pod: an init container copies Jumpstarter's exec helper into the shared volume, the
QEMU runtime runs as a native sidecar (root, for /dev/kvm, with the class's resources),
and the main container runs `jmp run` as the exporter image's unprivileged user with the
config Secret mounted. No ServiceAccount token is mounted: nothing in the Pod calls the
Kubernetes API. The Pod never restarts: the pool replaces a finished instance.
No I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from api.provisioners.qemu import DEFAULT_IMAGES as IMAGE_REFERENCES
from api.provisioners.qemu import PROVISIONER, Architecture, QemuParameters, qemu_size
from reconciler.model.access import PODS
from reconciler.model.jumpstarter import (
    CONFIG_DIR,
    EXEC_BINARY,
    EXPORTER_CONTAINER,
    EXPORTER_UID,
    LAUNCHER_SOCKET,
    QEMU_DRIVER,
    SHARED_DIR,
    TCP_NETWORK_DRIVER,
    readiness_command,
    run_command,
)
from reconciler.rendering.render import Image, InstanceContext

__all__ = ["DEFAULT_IMAGES", "FIRMWARE", "POD_SECURITY_LEVEL", "QemuProvisioner"]

# The Pod Security Standard the instance Pods meet: the runtime sidecar runs as root (for
# /dev/kvm), which `restricted` refuses; no privileged container, host path or added
# capability, so `baseline` admits them. The namespace of a pool must enforce no more.
POD_SECURITY_LEVEL = "baseline"

DEFAULT_IMAGES: Mapping[str, Image] = {
    role: Image(reference) for role, reference in IMAGE_REFERENCES.items()
}

# UEFI firmware in the runtime image, by guest architecture, under the partition names the
# QEMU driver boots from (`Qemu.default_partitions`).
FIRMWARE: Mapping[str, Mapping[str, str]] = {
    Architecture.X86_64.value: {
        "OVMF_CODE.fd": "/usr/share/edk2/ovmf/OVMF_CODE.fd",
        "OVMF_VARS.fd": "/usr/share/edk2/ovmf/OVMF_VARS.fd",
    },
    Architecture.AARCH64.value: {
        "OVMF_CODE.fd": "/usr/share/AAVMF/AAVMF_CODE.fd",
        "OVMF_VARS.fd": "/usr/share/AAVMF/AAVMF_VARS.fd",
    },
}
# The guest's SSH port, forwarded to the Pod's loopback and exported as the `tcp` driver.
SSH_FORWARD = {"hostaddr": "127.0.0.1", "hostport": 2222, "guestport": 22}
TCP_DRIVER = {
    "name": "tcp",
    "type": TCP_NETWORK_DRIVER,
    "config": {"host": SSH_FORWARD["hostaddr"], "port": SSH_FORWARD["hostport"]},
}
SHARED_VOLUME_LIMIT = "100Mi"
_CONFIG_VOLUME = "exporter-config"
_SHARED_VOLUME = "shared"


def _unprivileged() -> dict[str, Any]:
    """The exporter image's containers: its unprivileged user, nothing gained, no
    capability, the runtime's default seccomp profile (Pod Security's `restricted` for
    these two). Only the runtime sidecar runs as root (for /dev/kvm), adding nothing."""
    return {
        "runAsUser": EXPORTER_UID,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _qemu_config(config: Mapping[str, Any], params: QemuParameters) -> dict[str, Any]:
    """A Qemu driver's config with the pool's settings filled in where it says nothing."""
    filled = dict(config)
    filled["launcher_socket"] = LAUNCHER_SOCKET
    resources = params.resources
    given = {
        "arch": params.arch,
        "smp": resources.cpu if resources else None,
        "mem": qemu_size(resources.memory) if resources and resources.memory else None,
        "disk_size": qemu_size(resources.storage) if resources and resources.storage else None,
    }
    for key, value in given.items():
        if value is not None:
            filled.setdefault(key, value)
    arch = str(filled.get("arch") or Architecture.X86_64.value)
    if "default_partitions" not in filled and arch in FIRMWARE:
        filled["default_partitions"] = dict(FIRMWARE[arch])
    forwards = dict(filled.get("hostfwd") or {})
    forwards.setdefault("ssh", dict(SSH_FORWARD))
    filled["hostfwd"] = forwards
    return filled


def _container(name: str, image: Image, **fields: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image.image, **fields}
    if image.pull_policy:
        container["imagePullPolicy"] = image.pull_policy
    return container


class QemuProvisioner:
    name = PROVISIONER
    default_images = DEFAULT_IMAGES

    def drivers(self, ctx: InstanceContext) -> list[dict[str, Any]]:
        params = QemuParameters.model_validate(ctx.parameters)
        drivers = [copy.deepcopy(dict(d)) for d in ctx.drivers if isinstance(d, Mapping)]
        for driver in drivers:
            if driver.get("type") == QEMU_DRIVER and not driver.get("ref"):
                driver["config"] = _qemu_config(driver.get("config") or {}, params)
        names = {d.get("name") for d in drivers}
        has_tcp = any(d.get("type") == TCP_NETWORK_DRIVER for d in drivers)
        if not has_tcp and TCP_DRIVER["name"] not in names:
            drivers.append(copy.deepcopy(TCP_DRIVER))
        return drivers

    # A straight-line manifest: the instance Pod of DESIGN §7, field by field.
    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        shared = {"name": _SHARED_VOLUME, "mountPath": SHARED_DIR}
        env_from = (
            [{"secretRef": {"name": ctx.credentials_secret}}] if ctx.credentials_secret else []
        )
        copy_exec = _container(
            "copy-jumpstarter-exec",
            ctx.images["exporter"],
            command=["cp", EXEC_BINARY, f"{SHARED_DIR}/"],
            securityContext=_unprivileged(),
            volumeMounts=[shared],
        )
        runtime = _container(
            "target-runtime",
            ctx.images["runtime"],
            restartPolicy="Always",  # a native sidecar: runs beside the exporter
            env=[
                {
                    "name": "JUMPSTARTER_EXEC_LOG_FIELDS",
                    "value": (
                        f"component=exporter,exporter={ctx.exporter},namespace={ctx.namespace}"
                    ),
                }
            ],
            securityContext={"runAsUser": 0, "runAsNonRoot": False},  # /dev/kvm
            volumeMounts=[shared],
        )
        if ctx.resources:
            runtime["resources"] = dict(ctx.resources)
        exporter = _container(
            EXPORTER_CONTAINER,
            ctx.images["exporter"],
            command=run_command(),
            # Ready while `jmp run`'s serving child lives (a process check: 0.9.0 has no
            # endpoint); a failure's log tail becomes the termination message the pool's
            # Degraded condition quotes.
            readinessProbe={
                "exec": {"command": readiness_command()},
                # The first check runs once the container starts, and a new instance
                # counts as warm only from its first success: the period is what a
                # warm buffer waits on top of `jmp run`'s start (10 s doubled a pool's
                # fill time on a node). A check is one short python3 reading /proc
                # (tens of ms of CPU), so every 2 s costs ~1-2% of a core per instance.
                "periodSeconds": 2,
                # Generous beside the period: a python3 start on a loaded node can take
                # seconds, and a slow check must not read as a dead exporter.
                "timeoutSeconds": 5,
            },
            terminationMessagePolicy="FallbackToLogsOnError",
            env=[{"name": "JUMPSTARTER_LAUNCHER_SOCKET", "value": LAUNCHER_SOCKET}],
            securityContext=_unprivileged(),
            volumeMounts=[
                shared,
                {"name": _CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
            ],
        )
        for container in (runtime, exporter):
            if env_from:
                container["envFrom"] = list(env_from)
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            # No container calls the Kubernetes API (the exporter authenticates to
            # Jumpstarter with its own token): the namespace's ServiceAccount token stays out.
            "automountServiceAccountToken": False,
            "initContainers": [copy_exec, runtime],
            "containers": [exporter],
            "volumes": [
                {"name": _SHARED_VOLUME, "emptyDir": {"sizeLimit": SHARED_VOLUME_LIMIT}},
                {"name": _CONFIG_VOLUME, "secret": {"secretName": ctx.config_secret}},
            ],
        }
        if ctx.node_selector:
            spec["nodeSelector"] = dict(ctx.node_selector)
        if ctx.tolerations:
            spec["tolerations"] = list(ctx.tolerations)
        metadata: dict[str, Any] = {
            "name": ctx.exporter,
            "namespace": ctx.namespace,
            "labels": ctx.pod_labels(),
            "ownerReferences": [ctx.owner_reference()],
        }
        if ctx.annotations:
            metadata["annotations"] = dict(ctx.annotations)
        return {
            "apiVersion": PODS.api_version,
            "kind": PODS.kind,
            "metadata": metadata,
            "spec": spec,
        }
