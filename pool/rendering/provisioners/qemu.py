"""`qemu.jumpstarter.dev`: one QEMU virtual machine per instance.

Two layouts (`api.provisioners.qemu.Layout`), named by the `layout` parameter of the class
or set, else by the entry point (`default_layout`):

- `exporter` (the default of `virtualtarget reconcile`): what Jumpstarter's release
  0.9.0 runs. Its QEMU driver starts `qemu-system-<arch>` itself, so the Pod is one
  container, `jmp run` as the exporter image's unprivileged user, sized for the guest
  (the class's `scheduling.resources`, and requests for the guest's CPUs and memory
  where those say nothing of them). Its temporary directory is the guest's disk volume
  (`pool.rendering.provisioners.disk`, at `/disk`): 0.9.0's driver keeps the disk, the
  QMP and serial sockets in a `TemporaryDirectory()` there (a short path, as unix socket
  paths must be). The guest's UEFI firmware is the exporter image's (AAVMF for aarch64
  always, OVMF for x86_64 where `firmware.type` says `uefi`); else QEMU's own SeaBIOS
  boots it (`api.provisioners.qemu_firmware`).
- `sidecar` (the default of `exporter-set-controller`, which Jumpstarter's operator runs):
  exactly as Jumpstarter main's exporter-set controller renders it. An init container
  copies Jumpstarter's exec helper into a shared volume, the QEMU runtime runs as a
  native sidecar (root, for /dev/kvm, with the class's resources), the main container
  runs `jmp run`, and each QEMU driver gets `launcher_socket` and main's UEFI firmware paths;
  the guest's disk volume is mounted in the runtime and the exporter. One PID namespace
  for the Pod, so that the runtime ends on the kubelet's SIGTERM (main's waits out the
  grace period).

In both, a QEMU driver gets the guest's size from the parameters where its own config is
silent, and a `tcp` TcpNetwork driver to the guest's forwarded SSH port is added when the
template has none. No ServiceAccount token is mounted: nothing in the Pod calls the
Kubernetes API. The Pod never restarts: the pool replaces a finished instance. No I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from api.provisioners.check import ParameterCheck, check_parameters
from api.provisioners.qemu import DEFAULT_IMAGES as IMAGE_REFERENCES
from api.provisioners.qemu import (
    PROVISIONER,
    Architecture,
    FirmwareType,
    Layout,
    QemuParameters,
    QemuResources,
    qemu_size,
)
from api.provisioners.qemu_firmware import default_partitions, named_firmware
from api.provisioners.qemu_layout import class_layout_findings, set_layout_findings
from api.provisioners.qemu_storage import GuestDisk, guest_disk
from api.quantity import format_bytes, parse_quantity
from pool.model.access import Resource
from pool.model.jumpstarter import (
    CONFIG_DIR,
    EXEC_BINARY,
    EXPORTER_CONTAINER,
    LAUNCHER_SOCKET,
    QEMU_DRIVER,
    SHARED_DIR,
    TCP_NETWORK_DRIVER,
)
from pool.model.views import ProvisionedView
from pool.rendering.provisioners.base import Findings, Remote
from pool.rendering.provisioners.disk import (
    DISK_DIR,
    disk_mount,
    disk_security,
    disk_volume,
    sized,
)
from pool.rendering.provisioners.exporter import (
    container,
    env_from,
    exporter_fields,
    instance_pod,
    unprivileged,
)
from pool.rendering.render import Image, InstanceContext

__all__ = [
    "DEFAULT_IMAGES",
    "GUEST_OVERHEAD",
    "POD_SECURITY_LEVEL",
    "TMP_DIR",
    "QemuProvisioner",
    "guest_resources",
]

# The Pod Security Standard every layout's instance Pods meet: the `sidecar` runtime runs
# as root (for /dev/kvm), which `restricted` refuses; no privileged container, host path
# or added capability, so `baseline` admits them. The `exporter` layout's Pods meet
# `restricted` too. The namespace of a pool must enforce no more than its layout meets.
POD_SECURITY_LEVEL = "baseline"

DEFAULT_IMAGES: Mapping[str, Image] = {
    role: Image(reference) for role, reference in IMAGE_REFERENCES.items()
}

# The guest's SSH port, forwarded to the Pod's loopback and exported as the `tcp` driver.
SSH_FORWARD = {"hostaddr": "127.0.0.1", "hostport": 2222, "guestport": 22}
TCP_DRIVER = {
    "name": "tcp",
    "type": TCP_NETWORK_DRIVER,
    "config": {"host": SSH_FORWARD["hostaddr"], "port": SSH_FORWARD["hostport"]},
}
SHARED_VOLUME_LIMIT = "100Mi"
# The `exporter` layout: the temporary directory of `jmp run` and its QEMU driver (the
# guest's disk, its QMP, serial and VNC sockets) is the disk volume, and its container
# requests beside the guest's memory (QEMU's own, and `jmp run`) this much when the
# class names no resources.
TMP_DIR = DISK_DIR
GUEST_OVERHEAD = "256Mi"
_CONFIG_VOLUME = "exporter-config"
_SHARED_VOLUME = "shared"


def _parameters(ctx: InstanceContext) -> QemuParameters:
    """The merged parameters as the model reads them; empty when they are invalid (the
    reconciler renders no instance of such a set; a Pod rendered anyway gets no size)."""
    try:
        return QemuParameters.model_validate(ctx.parameters)
    except ValidationError:
        return QemuParameters()


def _disk(params: QemuParameters) -> GuestDisk:
    """The guest's disk: `storage`, sized by the legacy `resources.storage` where
    `storage.size` is unset."""
    return guest_disk(params.storage, params.resources.storage if params.resources else None)


def _qemu_config(
    config: Mapping[str, Any], params: QemuParameters, layout: Layout, firmware: FirmwareType | None
) -> dict[str, Any]:
    """A Qemu driver's config with the pool's settings filled in where it says nothing;
    `launcher_socket` is the layout's own (set for `sidecar`, never for `exporter`); the
    UEFI firmware of the guest's architecture where it boots UEFI (`firmware`: the named
    `firmware.type`)."""
    filled = dict(config)
    if layout is Layout.SIDECAR:
        filled["launcher_socket"] = LAUNCHER_SOCKET
    else:
        filled.pop("launcher_socket", None)  # release 0.9.0's driver refuses the key
    resources, disk = params.resources, _disk(params)
    given = {
        "arch": params.arch,
        "smp": resources.cpu if resources else None,
        "mem": qemu_size(resources.memory) if resources and resources.memory else None,
        # The size the pool names, as Jumpstarter main defaults it: none, no resize.
        "disk_size": qemu_size(disk.size) if disk.size else None,
    }
    for key, value in given.items():
        if value is not None:
            filled.setdefault(key, value)
    arch = str(filled.get("arch") or Architecture.X86_64.value)
    partitions = default_partitions(arch, firmware, layout)
    if partitions and "default_partitions" not in filled:
        filled["default_partitions"] = dict(partitions)
    forwards = dict(filled.get("hostfwd") or {})
    forwards.setdefault("ssh", dict(SSH_FORWARD))
    filled["hostfwd"] = forwards
    return filled


def guest_resources(
    guest: QemuResources | None, given: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resources of the container that runs QEMU in the `exporter` layout: the class's
    `given` ones, and requests sized for the guest where they say nothing of a resource
    (neither a request nor a limit): its virtual CPUs, and its memory plus
    `GUEST_OVERHEAD`. No limit is added: a memory limit would kill the guest at QEMU's
    first spike; a class that wants limits names them. (The disk's ephemeral storage is
    `disk.sized`'s.)"""
    resources = copy.deepcopy(dict(given or {}))
    named = {*(resources.get("requests") or {}), *(resources.get("limits") or {})}
    wanted: dict[str, str] = {}
    if guest and guest.cpu:
        wanted["cpu"] = str(guest.cpu)
    if guest and guest.memory:
        total = parse_quantity(guest.memory) + parse_quantity(GUEST_OVERHEAD)
        wanted["memory"] = format_bytes(total)
    missing = {name: value for name, value in wanted.items() if name not in named}
    if missing:
        resources["requests"] = {**(resources.get("requests") or {}), **missing}
    return resources


def _secured(spec: dict[str, Any], disk: GuestDisk) -> dict[str, Any]:
    """`spec` with the Pod securityContext its disk needs, if any."""
    if security := disk_security(disk):
        spec["securityContext"] = security
    return spec


class QemuProvisioner:
    name = PROVISIONER
    default_images = DEFAULT_IMAGES
    watches: tuple[Resource, ...] = ()  # a Pod (with its volumes) and nothing else
    remote: Remote | None = None  # on this cluster only

    def __init__(self, default_layout: Layout = Layout.EXPORTER) -> None:
        self.default_layout = default_layout

    def check_parameters(
        self, parameters: Mapping[str, Any], *, merged: bool = False
    ) -> ParameterCheck:
        return check_parameters(self.name, parameters, merged=merged)

    def class_findings(self, class_spec: Mapping[str, Any]) -> Findings:
        return class_layout_findings(class_spec)

    def set_findings(
        self,
        set_spec: Mapping[str, Any],
        class_spec: Mapping[str, Any],
        merged: Mapping[str, Any],
    ) -> Findings:
        return set_layout_findings(set_spec, class_spec, merged)

    def layout(self, parameters: Mapping[str, Any]) -> Layout:
        """The layout the merged parameters name, else this entry point's default."""
        named = parameters.get("layout")
        return Layout(named) if named in {m.value for m in Layout} else self.default_layout

    def drivers(self, ctx: InstanceContext) -> list[dict[str, Any]]:
        params = _parameters(ctx)
        layout = self.layout(ctx.parameters)
        firmware = named_firmware(ctx.parameters)
        drivers = [copy.deepcopy(dict(d)) for d in ctx.drivers if isinstance(d, Mapping)]
        for driver in drivers:
            if driver.get("type") == QEMU_DRIVER and not driver.get("ref"):
                config = driver.get("config") or {}
                driver["config"] = _qemu_config(config, params, layout, firmware)
        names = {d.get("name") for d in drivers}
        has_tcp = any(d.get("type") == TCP_NETWORK_DRIVER for d in drivers)
        if not has_tcp and TCP_DRIVER["name"] not in names:
            drivers.append(copy.deepcopy(TCP_DRIVER))
        return drivers

    def cleanup(
        self, instance: str, provisioned: Sequence[ProvisionedView]
    ) -> tuple[ProvisionedView, ...]:
        return ()  # the Pod and Secrets go with the Exporter (ownerReferences)

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        if self.layout(ctx.parameters) is Layout.SIDECAR:
            spec = self._sidecar_spec(ctx)
        else:
            spec = self._exporter_spec(ctx)
        return instance_pod(ctx, spec)

    def _exporter_spec(self, ctx: InstanceContext) -> dict[str, Any]:
        """Release 0.9.0: QEMU runs in the exporter's container, its temporary directory
        the guest's disk."""
        params = _parameters(ctx)
        disk = _disk(params)
        resources = sized(guest_resources(params.resources, ctx.resources), disk)
        exporter = container(
            EXPORTER_CONTAINER,
            ctx.images["exporter"],
            **exporter_fields(),
            env=[{"name": "TMPDIR", "value": TMP_DIR}],
            **env_from(ctx),
            securityContext=unprivileged(),
            volumeMounts=[
                disk_mount(),
                {"name": _CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
            ],
        )
        if resources:
            exporter["resources"] = resources
        spec = {
            "restartPolicy": "Never",
            # No container calls the Kubernetes API (the exporter authenticates to
            # Jumpstarter with its own token): the namespace's ServiceAccount token stays out.
            "automountServiceAccountToken": False,
            "containers": [exporter],
            "volumes": [
                disk_volume(disk),
                {"name": _CONFIG_VOLUME, "secret": {"secretName": ctx.config_secret}},
            ],
        }
        return _secured(spec, disk)

    def _sidecar_spec(self, ctx: InstanceContext) -> dict[str, Any]:
        """Jumpstarter main: QEMU runs in a runtime sidecar."""
        disk = _disk(_parameters(ctx))
        shared = {"name": _SHARED_VOLUME, "mountPath": SHARED_DIR}
        copy_exec = container(
            "copy-jumpstarter-exec",
            ctx.images["exporter"],
            command=["cp", EXEC_BINARY, f"{SHARED_DIR}/"],
            securityContext=unprivileged(),
            volumeMounts=[shared],
        )
        runtime = container(
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
            **env_from(ctx),
            securityContext={"runAsUser": 0, "runAsNonRoot": False},  # /dev/kvm
            volumeMounts=[shared, disk_mount()],
        )
        if resources := sized(ctx.resources, disk):  # the runtime runs QEMU
            runtime["resources"] = resources
        exporter = container(
            EXPORTER_CONTAINER,
            ctx.images["exporter"],
            **exporter_fields(),
            env=[{"name": "JUMPSTARTER_LAUNCHER_SOCKET", "value": LAUNCHER_SOCKET}],
            **env_from(ctx),
            securityContext=unprivileged(),
            volumeMounts=[
                shared,
                disk_mount(),
                {"name": _CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
            ],
        )
        spec = {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            # `jumpstarter-exec serve` handles no SIGTERM (it stops on its socket's
            # Shutdown): as its container's PID 1 it ignores the kubelet's, and every Pod
            # ends only at its 30 s grace, holding its CPU. In the Pod's one PID namespace
            # the pause process is PID 1 and SIGTERM ends it. The exporter sees nothing it
            # could not already reach: it runs what it likes there through the socket.
            "shareProcessNamespace": True,
            "initContainers": [copy_exec, runtime],
            "containers": [exporter],
            "volumes": [
                {"name": _SHARED_VOLUME, "emptyDir": {"sizeLimit": SHARED_VOLUME_LIMIT}},
                disk_volume(disk),
                {"name": _CONFIG_VOLUME, "secret": {"secretName": ctx.config_secret}},
            ],
        }
        return _secured(spec, disk)
