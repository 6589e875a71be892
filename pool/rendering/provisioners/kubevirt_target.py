"""What a `kubevirt.jumpstarter.dev` instance is made of on the target cluster, exactly as
Jumpstarter's pull request #927 renders it (`controller/internal/exporterset/
provisioners/kubevirt/kubevirt.go`, cited by line): one VirtualMachine named after the
Exporter in `parameters.namespace`, created Halted (the KubevirtPower driver's `on`
starts it), and a Service per exposed port; and the address of such a Service as the
exporter's TcpNetwork driver gets it.

Where Go's JSON encoding writes more than the fields it sets (an empty template
`metadata: {creationTimestamp: null}`), this leaves it out: the apiserver stores the same.
Go ranges over `forwardPorts`, a map, in random order; here they go in name order.
Quantities are written as Go's `resource.Quantity` prints them (`4096Mi` as `4Gi`).

Nothing here reaches the target cluster: the objects are dicts, to be created there with
the kubeconfig of the class's credentials Secret (docs/kubevirt.md says what does not
exist yet). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.provisioners.kubevirt import (
    DEFAULT_CPU,
    DEFAULT_DISK_SIZE,
    DEFAULT_MEMORY,
    PROVISIONER,
    KubevirtParameters,
    SshAccess,
    StorageType,
)
from api.provisioners.qemu_storage import DEFAULT_ACCESS_MODES as _ONCE
from api.provisioners.qemu_storage import AccessMode
from api.quantity import canonical_bytes, parse_quantity, quantity_format
from pool.model.access import Resource, target_access

__all__ = [
    "DRIVER_RULES",
    "FAILED_STATUSES",
    "MANAGED_BY",
    "SERVICES",
    "SSH_PORT",
    "SSH_SERVICE_PORT",
    "TARGET_RESOURCES",
    "VIRTUAL_MACHINES",
    "disk_size",
    "kubeconfig_rules",
    "render_services",
    "render_virtual_machine",
    "service_address",
    "service_ports",
    "target_labels",
    "virtual_machine_failure",
]

Obj = dict[str, Any]

VIRTUAL_MACHINES = Resource("kubevirt.io", "v1", "virtualmachines", "VirtualMachine")
SERVICES = Resource("", "v1", "services", "Service")
# What an instance is made of on the target cluster, and what its removal deletes there.
TARGET_RESOURCES = (VIRTUAL_MACHINES, SERVICES)
MANAGED_BY = "jumpstarter"  # kubevirt.go:200, the value of app.kubernetes.io/managed-by
_LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"  # kubevirt.go:52-54
_LABEL_EXPORTER = "jumpstarter.dev/exporter"
_LABEL_PROVISIONER = "jumpstarter.dev/provisioner"
SSH_PORT = 22  # kubevirt.go:326, 388
SSH_SERVICE_PORT = 22000  # kubevirt.go:388
_VM_NAME_LABEL = "vm.kubevirt.io/name"  # kubevirt.go:426, KubeVirt's label of the VM's Pod
_ROOT = "root"
_CLOUD_INIT = "cloudinit"
_NETWORK = "default"


def target_labels(exporter: str) -> dict[str, str]:
    """The labels of the VM and its Services (kubevirt.go:199-203, 417-421)."""
    return {
        _LABEL_MANAGED_BY: MANAGED_BY,
        _LABEL_EXPORTER: exporter,
        _LABEL_PROVISIONER: PROVISIONER,
    }


def _printed(quantity: str) -> str:
    """A quantity as Go's resource.Quantity prints it (whole bytes; another as given)."""
    amount = parse_quantity(quantity)
    if amount != amount.to_integral_value():
        return quantity
    return canonical_bytes(int(amount), quantity_format(quantity))


def disk_size(params: KubevirtParameters) -> str:
    """The root disk's size: `storage.size` (default 20Gi) wherever `storage` is given,
    else `resources.storage`, else 20Gi (params.go:105-107, 143-145, 166)."""
    if params.storage is not None:
        return params.storage.size or DEFAULT_DISK_SIZE
    return (params.resources.storage if params.resources else None) or DEFAULT_DISK_SIZE


def service_ports(params: KubevirtParameters) -> list[tuple[str, int, int]]:
    """(name, Service port, guest port) of each exposed port: SSH's 22000 -> 22, then the
    forward ports by name (kubevirt.go:386-398)."""
    ports = [("ssh", SSH_SERVICE_PORT, SSH_PORT)] if params.ssh_access else []
    forwards = params.forward_ports or {}
    return ports + [(name, forwards[name], forwards[name]) for name in sorted(forwards)]


def _data_volume_source(params: KubevirtParameters) -> Obj:
    """kubevirt.go:253-268: the first of http, registry (a `docker://` URL), pvc."""
    source = params.storage.source if params.storage else None
    if source is None:
        return {}
    if source.http is not None:
        return {"http": {"url": source.http.url}}
    if source.registry is not None:
        return {"registry": {"url": f"docker://{source.registry.image}"}}
    if source.pvc is not None:
        return {"pvc": {"namespace": source.pvc.namespace or "", "name": source.pvc.name}}
    return {}


def _data_volume_template(name: str, params: KubevirtParameters) -> Obj:
    """kubevirt.go:270-301."""
    assert params.storage is not None
    storage: Obj = {
        "accessModes": [AccessMode(m).value for m in params.storage.access_modes or _ONCE],
        "resources": {"requests": {"storage": _printed(disk_size(params))}},
    }
    if params.storage.storage_class_name:
        storage["storageClassName"] = params.storage.storage_class_name
    return {
        "metadata": {"name": name},
        "spec": {"source": _data_volume_source(params), "storage": storage},
    }


def _virtio(name: str) -> Obj:
    return {"name": name, "disk": {"bus": "virtio"}}


def render_virtual_machine(exporter: str, params: KubevirtParameters) -> Obj:
    """The VirtualMachine of the instance whose Exporter is `exporter`
    (kubevirt.go:184-358), from valid merged parameters."""
    resources = params.resources
    cores = (resources.cpu if resources else None) or DEFAULT_CPU
    memory = (resources.memory if resources else None) or DEFAULT_MEMORY
    interface: Obj = {"name": _NETWORK, "masquerade": {}}
    ports = [
        {"name": name, "port": guest, "protocol": "TCP"} for name, _, guest in service_ports(params)
    ]
    if ports:  # kubevirt.go:321-336
        interface["ports"] = ports
    disks, spec = [_virtio(_ROOT)], {}
    data_volume = params.storage is not None and params.storage.type == StorageType.DATA_VOLUME
    if data_volume:  # kubevirt.go:251-309
        volume_name = f"{exporter}-{_ROOT}"
        spec["dataVolumeTemplates"] = [_data_volume_template(volume_name, params)]
        volumes: list[Obj] = [{"name": _ROOT, "dataVolume": {"name": volume_name}}]
    else:  # kubevirt.go:310-318
        volumes = [{"name": _ROOT, "containerDisk": {"image": params.image}}]
    if params.cloud_init:  # kubevirt.go:338-355
        volumes.append({"name": _CLOUD_INIT, "cloudInitNoCloud": {"userData": params.cloud_init}})
        disks.append(_virtio(_CLOUD_INIT))
    template = {
        "domain": {
            "cpu": {"cores": cores},
            "memory": {"guest": _printed(memory)},
            "devices": {"disks": disks, "interfaces": [interface]},
        },
        "networks": [{"name": _NETWORK, "pod": {}}],
        "volumes": volumes,
    }
    return {
        "apiVersion": VIRTUAL_MACHINES.api_version,
        "kind": VIRTUAL_MACHINES.kind,
        "metadata": {
            "name": exporter,
            "namespace": params.namespace,
            "labels": target_labels(exporter),
        },
        "spec": {"runStrategy": "Halted", **spec, "template": {"spec": template}},
    }


def render_services(exporter: str, params: KubevirtParameters, vm_uid: str) -> list[Obj]:
    """The Services of the instance's exposed ports (kubevirt.go:363-445), owned by its
    VirtualMachine (`vm_uid`, known once the VM is created): NodePort, or LoadBalancer
    where `sshAccess` says so, selecting the VM's Pod."""
    kind = "LoadBalancer" if params.ssh_access == SshAccess.LOAD_BALANCER else "NodePort"
    owner = {
        "apiVersion": VIRTUAL_MACHINES.api_version,
        "kind": VIRTUAL_MACHINES.kind,
        "name": exporter,
        "uid": vm_uid,
    }
    return [
        {
            "apiVersion": SERVICES.api_version,
            "kind": SERVICES.kind,
            "metadata": {
                "name": f"{exporter}-{name}",
                "namespace": params.namespace,
                "ownerReferences": [dict(owner)],
                "labels": target_labels(exporter),
            },
            "spec": {
                "type": kind,
                "selector": {_VM_NAME_LABEL: exporter},
                "ports": [{"name": name, "port": port, "targetPort": guest, "protocol": "TCP"}],
            },
        }
        for name, port, guest in service_ports(params)
    ]


def service_address(service: Mapping[str, Any], default_port: int) -> tuple[str, int] | None:
    """Where the exporter reaches a Service as read from the target cluster
    (kubevirt.go:611-658): its first port (the node port of a NodePort Service), at a
    LoadBalancer's first ingress IP or hostname, else its ClusterIP; None without one."""
    spec, status = service.get("spec") or {}, service.get("status") or {}
    ports = spec.get("ports") or []
    port = default_port
    if ports:
        first = ports[0]
        node_port = first.get("nodePort") or 0
        port = node_port if spec.get("type") == "NodePort" and node_port > 0 else first.get("port")
    if spec.get("type") == "LoadBalancer":
        for ingress in (status.get("loadBalancer") or {}).get("ingress") or []:
            if host := ingress.get("ip") or ingress.get("hostname"):
                return str(host), int(port)
    cluster_ip = spec.get("clusterIP") or ""
    if cluster_ip and cluster_ip != "None":
        return str(cluster_ip), int(port)
    return None


# The printable statuses of a VirtualMachine (kubevirt.io/api v1.7.0 core/v1/types.go,
# `VirtualMachinePrintableStatus`) that say it cannot run as it is: its instance is
# failed. Stopped, Starting, Running and the like are a lease's doing; Provisioning and
# WaitingForVolumeBinding wait on the target cluster, as a Pending Pod does.
FAILED_STATUSES = frozenset(
    {
        "CrashLoopBackOff",
        "ErrorUnschedulable",
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrorPvcNotFound",
        "DataVolumeError",
    }
)


def virtual_machine_failure(vm: Mapping[str, Any]) -> str:
    """Why the VirtualMachine can serve no lease, "" while it can: a failed printable
    status, with the message of its `Failure` condition where KubeVirt gives one."""
    status = vm.get("status") or {}
    printable = str(status.get("printableStatus") or "")
    if printable not in FAILED_STATUSES:
        return ""
    detail = next(
        (
            str(c.get("message") or "")
            for c in status.get("conditions") or []
            if c.get("type") == "Failure" and c.get("message")
        ),
        "",
    )
    meta = vm.get("metadata") or {}
    where = f"VirtualMachine {meta.get('namespace', '')}/{meta.get('name', '')}"
    return f"{where} is {printable}: {detail}" if detail else f"{where} is {printable}"


# What the exporter's drivers call with the same kubeconfig, in the target namespace
# (#927's jumpstarter_driver_kubevirt/driver.py): power patches the VM's runStrategy and
# deletes it (`off(destroy=True)`), reads its VMI; the console is a WebSocket to the VMI's
# `console` subresource; flash deletes and creates the DataVolume `<exporter>-root`.
DRIVER_RULES: tuple[Obj, ...] = (
    {"apiGroups": ["kubevirt.io"], "resources": ["virtualmachines"], "verbs": ["patch", "delete"]},
    {"apiGroups": ["kubevirt.io"], "resources": ["virtualmachineinstances"], "verbs": ["get"]},
    {
        "apiGroups": ["subresources.kubevirt.io"],
        "resources": ["virtualmachineinstances/console"],
        "verbs": ["get"],
    },
    {"apiGroups": ["cdi.kubevirt.io"], "resources": ["datavolumes"], "verbs": ["create", "delete"]},
)


def kubeconfig_rules() -> list[Obj]:
    """The rules of the Role the credentials Secret's kubeconfig needs in the target
    namespace: the reconciler's calls on the instances' objects there
    (`pool.model.access.target_access`), then the drivers' (`DRIVER_RULES`)."""
    ours = [
        {"apiGroups": [p.api_group], "resources": [p.resource], "verbs": list(p.verbs)}
        for p in target_access(TARGET_RESOURCES)
    ]
    return [*ours, *(dict(rule) for rule in DRIVER_RULES)]
