"""`kubevirt.jumpstarter.dev`: one KubeVirt VirtualMachine per instance on a target
cluster, and a light exporter Pod here, as Jumpstarter's pull request #927 designs it
(`controller/internal/exporterset/provisioners/kubevirt/kubevirt.go`, cited by line).

- Admission: the parameters (`api.provisioners.kubevirt`); the merged ones must name the
  target namespace and, for a containerDisk, the image. A class must name the Secret
  holding the target cluster's kubeconfig (`credentialsSecretRef`, key `kubeconfig`):
  without one no instance can be made (remote.go:88-90).
- The exporter Pod: `jmp run` in the exporter container as every provisioner here runs
  it (`pool.rendering.provisioners.exporter`), the config Secret mounted as for QEMU,
  and the credentials Secret as the volume `kubevirt-credentials` at
  `/etc/jumpstarter/kubevirt` (kubevirt.go:56-58, 522-530), where the drivers read the
  kubeconfig. Go renders the exporter as a native sidecar beside a `sleep infinity`
  container and an init container copying `jumpstarter-exec` (kubevirt.go:479-513); here
  the exporter is the Pod's one container with `restartPolicy: Never`, so an instance
  whose `jmp run` ends is replaced as the pool replaces every finished instance, and
  nothing copies a helper no container runs.
- The drivers (kubevirt.go:538-607): unless the template has a `Kubevirt` driver,
  `power`, `console` and `storage` (KubevirtPower, KubevirtConsole, KubevirtStorage) with
  the config the driver reads, and a TcpNetwork driver for SSH and each forward port
  whose Service's address is known (`drivers_with_services`: read from the target
  cluster, where Go reads it live; none is known to a pure rendering, as none is to Go
  when the target cluster cannot be read).
- The VirtualMachine and Services (`kubevirt_target`), deleted by `cleanup`.

`watches` is `()`: those objects live on the target cluster, which `remote`
(`KubevirtRemote`) names for the runtime (`reconciler.runtime.targets`): the Secret and
namespace, the VM then its Services to create there before the Pod, and which VM has
failed. No I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from api.fielderrors import ErrorType, FieldError
from api.provisioners.check import ParameterCheck, check_parameters
from api.provisioners.kubevirt import DEFAULT_IMAGES as IMAGE_REFERENCES
from api.provisioners.kubevirt import (
    INJECTED_DRIVERS,
    PROVISIONER,
    KubevirtParameters,
    merged_errors,
    port_name_errors,
)
from pool.model.access import Resource
from pool.model.jumpstarter import CONFIG_DIR, EXPORTER_CONTAINER, TCP_NETWORK_DRIVER
from pool.model.views import ProvisionedView
from pool.rendering.provisioners.base import Findings, Remote, TargetRef
from pool.rendering.provisioners.exporter import (
    container,
    env_from,
    exporter_fields,
    instance_pod,
    unprivileged,
)
from pool.rendering.provisioners.kubevirt_target import (
    SSH_SERVICE_PORT,
    TARGET_RESOURCES,
    render_services,
    render_virtual_machine,
    service_address,
    service_ports,
    virtual_machine_failure,
)
from pool.rendering.render import Image, InstanceContext

__all__ = [
    "CREDENTIALS_DIR",
    "CREDENTIALS_VOLUME",
    "DEFAULT_IMAGES",
    "DRIVER_TYPES",
    "KUBECONFIG_KEY",
    "KubevirtProvisioner",
    "KubevirtRemote",
    "drivers_with_services",
]

DEFAULT_IMAGES: Mapping[str, Image] = {
    role: Image(reference) for role, reference in IMAGE_REFERENCES.items()
}
CREDENTIALS_VOLUME = "kubevirt-credentials"  # kubevirt.go:56-58
CREDENTIALS_DIR = "/etc/jumpstarter/kubevirt"
KUBECONFIG_KEY = "kubeconfig"  # the Secret's key (remote.go:106), a file in CREDENTIALS_DIR
_DRIVERS = "jumpstarter_driver_kubevirt.driver"
# kubevirt.go:60-63: the composite, then the three it injects by INJECTED_DRIVERS' names.
COMPOSITE_DRIVER = f"{_DRIVERS}.Kubevirt"
DRIVER_TYPES = tuple(f"{_DRIVERS}.Kubevirt{kind}" for kind in ("Power", "Console", "Storage"))
_CONFIG_VOLUME = "exporter-config"


def _parameters(ctx: InstanceContext) -> KubevirtParameters:
    """The merged parameters as the model reads them; empty when they are invalid (the
    reconciler renders no instance of such a set)."""
    try:
        return KubevirtParameters.model_validate(ctx.parameters)
    except ValidationError:
        return KubevirtParameters()


def drivers_with_services(
    ctx: InstanceContext, services: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The template's drivers and those the provisioner adds (kubevirt.go:538-607), the
    TcpNetwork ones for the Services in `services` (by name, as read from the target
    cluster) that have an address."""
    drivers = [copy.deepcopy(dict(d)) for d in ctx.drivers if isinstance(d, Mapping)]
    if any(d.get("type") == COMPOSITE_DRIVER for d in drivers):
        return drivers  # kubevirt.go:554-564
    params = _parameters(ctx)
    config = {  # kubevirt.go:565-569; the fields of the driver's `_KubevirtBase`
        "kubeconfig": f"{CREDENTIALS_DIR}/{KUBECONFIG_KEY}",
        "namespace": params.namespace,
        "vm_name": ctx.exporter,
    }
    for name, kind in zip(INJECTED_DRIVERS, DRIVER_TYPES, strict=True):
        drivers.append({"name": name, "type": kind, "config": dict(config)})
    given = {d.get("name") for d in ctx.drivers if isinstance(d, Mapping)}
    for name, port, _ in service_ports(params):
        if name != "ssh" and name in given:
            continue  # kubevirt.go:592-594: a template driver of that name stays alone
        service = services.get(f"{ctx.exporter}-{name}")
        default = SSH_SERVICE_PORT if name == "ssh" else port
        address = service_address(service, default) if service is not None else None
        if address is not None:
            host, reached = address
            config_of = {"host": host, "port": reached}
            drivers.append({"name": name, "type": TCP_NETWORK_DRIVER, "config": config_of})
    return drivers


class KubevirtRemote:
    """The target cluster's part of an instance (`base.Remote`): its VirtualMachine, then
    its Services, as #927 creates them before the Pod (kubevirt.go:116-180)."""

    resources: tuple[Resource, ...] = TARGET_RESOURCES  # the VM first: each instance has one

    def target(
        self, credentials_secret: str | None, parameters: Mapping[str, Any]
    ) -> TargetRef | None:
        namespace = parameters.get("namespace")
        if not credentials_secret or not isinstance(namespace, str) or not namespace:
            return None
        return TargetRef(credentials_secret, KUBECONFIG_KEY, namespace)

    def objects(
        self, ctx: InstanceContext, extra_labels: Mapping[str, str], owner_uid: str = ""
    ) -> list[dict[str, Any]]:
        params = KubevirtParameters.model_validate(ctx.parameters)
        if owner_uid:
            found = render_services(ctx.exporter, params, owner_uid)
        else:
            found = [render_virtual_machine(ctx.exporter, params)]
        for obj in found:
            obj["metadata"]["labels"].update(extra_labels)
        return found

    def failure(self, obj: Mapping[str, Any]) -> str:
        return virtual_machine_failure(obj) if obj.get("kind") == "VirtualMachine" else ""


class KubevirtProvisioner:
    name = PROVISIONER
    default_images = DEFAULT_IMAGES
    # The management cluster's resources beyond the Exporter, Pod and Secrets: none. The
    # VirtualMachine and Services (`kubevirt_target.TARGET_RESOURCES`) are the target
    # cluster's, reached through `remote`.
    watches: tuple[Resource, ...] = ()
    remote: Remote | None = KubevirtRemote()

    def check_parameters(
        self, parameters: Mapping[str, Any], *, merged: bool = False
    ) -> ParameterCheck:
        found = check_parameters(self.name, parameters, merged=merged)
        errors: list[FieldError] = [*found.errors, *port_name_errors(parameters)]
        if merged:
            errors += merged_errors(parameters)
        return replace(found, errors=tuple(errors))

    def class_findings(self, class_spec: Mapping[str, Any]) -> Findings:
        """A class must name its credentials Secret; what its parameters leave to its sets
        is a warning (each set's merged parameters must say it)."""
        errors: list[FieldError] = []
        reference = class_spec.get("credentialsSecretRef")
        if not isinstance(reference, Mapping) or not reference.get("name"):
            errors.append(
                FieldError.required(
                    "spec.credentialsSecretRef.name",
                    f"{self.name} reaches the target cluster with the kubeconfig in this "
                    f"Secret's key `{KUBECONFIG_KEY}`",
                )
            )
        parameters = class_spec.get("parameters")
        warnings: list[str] = []
        for error in merged_errors(parameters if isinstance(parameters, Mapping) else {}):
            if error.type is ErrorType.REQUIRED:
                warnings.append(
                    f"{error.field}: not set by the class: each ExporterSet must set it"
                )
            else:
                errors.append(error)
        return errors, warnings

    def set_findings(
        self,
        set_spec: Mapping[str, Any],
        class_spec: Mapping[str, Any],
        merged: Mapping[str, Any],
    ) -> Findings:
        return [], []

    def drivers(self, ctx: InstanceContext) -> list[dict[str, Any]]:
        return drivers_with_services(ctx, ctx.target_objects)

    def cleanup(
        self, instance: str, provisioned: Sequence[ProvisionedView]
    ) -> tuple[ProvisionedView, ...]:
        """The instance's VirtualMachine and Services, whatever the reclaim policy
        (kubevirt.go:660-721 deletes them on every removal), as the runtime's watch of
        the target cluster observed them (`reconciler.runtime.targets`)."""
        return tuple(
            p for p in provisioned if p.resource in TARGET_RESOURCES and p.instance == instance
        )

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        mounts = [{"name": _CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]
        volumes: list[dict[str, Any]] = [
            {"name": _CONFIG_VOLUME, "secret": {"secretName": ctx.config_secret}}
        ]
        if ctx.credentials_secret:  # kubevirt.go:501-502, 522-530
            mounts.append(
                {"name": CREDENTIALS_VOLUME, "mountPath": CREDENTIALS_DIR, "readOnly": True}
            )
            volumes.append(
                {"name": CREDENTIALS_VOLUME, "secret": {"secretName": ctx.credentials_secret}}
            )
        exporter = container(
            EXPORTER_CONTAINER,
            ctx.images["exporter"],
            **exporter_fields(),
            **env_from(ctx),
            securityContext=unprivileged(),
            volumeMounts=mounts,
        )
        if ctx.resources:
            exporter["resources"] = copy.deepcopy(dict(ctx.resources))
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            # The drivers reach the target cluster with the mounted kubeconfig, never this
            # cluster's API: the namespace's ServiceAccount token stays out.
            "automountServiceAccountToken": False,
            "containers": [exporter],
            "volumes": volumes,
        }
        return instance_pod(ctx, spec)
