"""KubeVirt installed on a running node cluster as its users install it.

`install(cluster)` imports the images `harness.kubevirt_build` made into the node's
containerd, applies KubeVirt's own `kubevirt-operator.yaml`, waits for virt-operator, then
applies `kubevirt-cr.yaml` with `spec.configuration.developerConfiguration.useEmulation`
(QEMU's TCG: nothing here relies on /dev/kvm) and waits for the `KubeVirt` to be
`Available`. What this node tier needs beside that:

- the node is labelled `node-role.kubernetes.io/control-plane` (it runs the control plane,
  as kubeadm labels such a node): virt-operator's Deployment requires one;
- the kubelet keeps its pods under the cluster's work folder (`--root-dir`), not
  /var/lib/kubelet: the CR's `customizeComponents` (KubeVirt's own way to change what the
  operator deploys) points virt-handler's `kubelet` and `kubelet-pods` host paths there,
  and gives it the kubelet's pods folder (`--kubelet-pods-dir`, its flag for this case);
- virt-handler registers its device plugins (kvm, tun, vhost-net) in that volume's
  device-plugins folder, while the kubelet listens in /var/lib/kubelet/device-plugins
  whatever its root: the host's folder is bound into the kubelet root for the install's
  life;
- the host has no systemd, so `/` is a private mount, and virt-handler's Bidirectional and
  virt-launcher's HostToContainer mounts need shared ones: `/` is made rshared for the
  install's life (as systemd makes it on any other host) and private again after, unless
  the cluster has it so for its own life (`running_node_cluster(shared_root=True)`, the
  node tier's way: Pods that outlive KubeVirt must not see it turn private);
- one replica of virt-api and of virt-controller (`spec.infra.replicas`), not two.

`uninstall` deletes the CR (virt-operator removes what it deployed) and then the
operator's manifest, as KubeVirt's docs say; `clean_host` then undoes the host changes
and removes what virt-handler left on the host, before the cluster stops.
`stop_machines` stops every VMI at once; `remove` does the three.

    kv = install(cluster)                       # about two minutes
    remove(kv)                                  # stop_machines, uninstall, clean_host
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.kubeget import find_json
from harness.kubevirt_build import (
    COMPONENTS,
    NAMESPACE,
    KubeVirtBuild,
    image_name,
)
from harness.kubevirt_build import build as build_kubevirt
from harness.node import NodeCluster
from harness.nodehost import root_is_shared

__all__ = [
    "KubeVirtInstall",
    "KubeVirtInstallError",
    "clean_host",
    "install",
    "remove",
    "stop_machines",
    "uninstall",
]

AVAILABLE_TIMEOUT_S = 600.0
# Where virt-handler keeps its state on the host (hostPath volumes it creates).
HOST_LEFTOVERS = (
    "/var/run/kubevirt",
    "/var/run/kubevirt-private",
    "/var/run/kubevirt-libvirt-runtimes",
    "/var/lib/kubevirt-node-labeller",
    "/var/run/kubevirt-ephemeral-disks",
)
DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
LAUNCHER_SELECTOR = "kubevirt.io=virt-launcher"  # the label of the Pods that run the VMs


class KubeVirtInstallError(RuntimeError):
    """The install or the removal failed; the message says which step, with its output."""


@dataclass
class KubeVirtInstall:
    """An installed KubeVirt: its build and how long each step took (seconds)."""

    cluster: NodeCluster
    built: KubeVirtBuild
    timings: dict[str, float] = field(default_factory=dict)
    made_shared: bool = False
    bound: Path | None = None  # the kubelet root's device-plugins, bound to the host's


def _kubectl(cluster: NodeCluster, *args: str, **kwargs: Any) -> str:
    return cluster.kubectl(*args, **kwargs).stdout


def _kubelet_root(cluster: NodeCluster) -> Path:
    """The first node's kubelet `--root-dir` (harness.nodeworker)."""
    return cluster.nodes[0].workdir / "kubelet" / "root"


def _handler_patch(cluster: NodeCluster) -> dict[str, Any]:
    """virt-handler's host paths of the kubelet's folders, as this kubelet has them; and
    the pods folder also at its host path, where `--kubelet-pods-dir` has virt-handler
    look (upstream's assumption: the same path inside and outside)."""
    root = _kubelet_root(cluster)
    pods = str(root / "pods")
    mount = {"name": "kubelet-pods-host", "mountPath": pods, "mountPropagation": "HostToContainer"}
    spec = {
        "volumes": [
            {"name": "kubelet-pods", "hostPath": {"path": pods}},
            {"name": "kubelet", "hostPath": {"path": str(root)}},
            {"name": "kubelet-pods-host", "hostPath": {"path": pods}},
        ],
        "containers": [{"name": "virt-handler", "volumeMounts": [mount]}],
    }
    return {
        "resourceName": "virt-handler",
        "resourceType": "DaemonSet",
        "type": "strategic",
        "patch": json.dumps({"spec": {"template": {"spec": spec}}}),
    }


def _handler_args_patch(cluster: NodeCluster) -> dict[str, Any]:
    """virt-handler's `--kubelet-pods-dir` ("matching host's path for kubelet root"): it
    bind-mounts containerDisks there, in the host's mount namespace."""
    flag = f"--kubelet-pods-dir={_kubelet_root(cluster) / 'pods'}"
    patch = [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": flag}]
    return {
        "resourceName": "virt-handler",
        "resourceType": "DaemonSet",
        "type": "json",
        "patch": json.dumps(patch),
    }


def kubevirt_cr(built: KubeVirtBuild, cluster: NodeCluster) -> dict[str, Any]:
    """KubeVirt's own kubevirt-cr.yaml with emulation on and the node tier's paths."""
    cr: dict[str, Any] = yaml.safe_load(built.cr_manifest.read_text())
    spec = cr.setdefault("spec", {})
    configuration = spec.setdefault("configuration", {})
    configuration.setdefault("developerConfiguration", {})["useEmulation"] = True
    patches = [_handler_patch(cluster), _handler_args_patch(cluster)]
    spec["customizeComponents"] = {"patches": patches}
    # One replica of virt-api and virt-controller, not two: one node, two cores.
    spec["infra"] = {"replicas": 1}
    return cr


def _make_root_shared() -> bool:
    """Make `/` rshared when it is private (no systemd did it); whether it was changed. (The
    node cluster does it for its whole life when it is to run KubeVirt: `running_node_cluster`'s
    `shared_root`; then this changes nothing.)"""
    if root_is_shared():
        return False
    subprocess.run(["mount", "--make-rshared", "/"], check=True)
    return True


def _bind_device_plugins(cluster: NodeCluster) -> Path:
    """The kubelet serves device-plugin registration in /var/lib/kubelet/device-plugins
    whatever its root; virt-handler looks under its `kubelet` volume (the kubelet root
    here): the host's folder is bound there (a mount of the host's, not one virt-handler's
    Bidirectional volume would carry back)."""
    source, target = Path(DEVICE_PLUGINS), _kubelet_root(cluster) / "device-plugins"
    source.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
    return target


def _import_images(cluster: NodeCluster, built: KubeVirtBuild) -> None:
    """One import of the archive gives every component's name; each is checked."""
    cluster.import_image(built.archive, image_name(COMPONENTS[0].name))
    listed = subprocess.run(
        [*cluster.ctr, "images", "ls", "-q"], capture_output=True, text=True, check=True
    ).stdout.split()
    missing = [image_name(c.name) for c in COMPONENTS if image_name(c.name) not in listed]
    if missing:
        raise KubeVirtInstallError(f"kubevirt: {built.archive} did not give {missing}")


def _wait(cluster: NodeCluster, what: str, ready: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cluster.plane.check_alive()
        if ready():
            return
        time.sleep(1)
    pods = _kubectl(cluster, "get", "pods", "-A", "-o", "wide", check=False)
    raise KubeVirtInstallError(f"kubevirt: {what} not ready after {timeout:.0f}s\n{pods}")


def _condition(cluster: NodeCluster, kind: str, name: str, namespace: str, kind_of: str) -> bool:
    found = find_json(cluster.plane, kind, name, "-n", namespace)
    if found is None:
        return False
    conditions = found.get("status", {}).get("conditions", [])
    return any(c["type"] == kind_of and c["status"] == "True" for c in conditions)


def install(
    cluster: NodeCluster, built: KubeVirtBuild | None = None, timeout: float = AVAILABLE_TIMEOUT_S
) -> KubeVirtInstall:
    """Install KubeVirt on `cluster` (built first when `built` is None) and wait until its
    `KubeVirt` is Available; with the time of each step. A failed install is removed
    again, host changes too."""
    kv = KubeVirtInstall(cluster, built or build_kubevirt())
    try:
        _install(kv, timeout)
    except BaseException:
        with contextlib.suppress(Exception):
            uninstall(kv)
        clean_host(kv)
        raise
    return kv


def _install(kv: KubeVirtInstall, timeout: float) -> None:
    cluster, built, begin = kv.cluster, kv.built, time.monotonic()
    kv.made_shared = _make_root_shared()
    kv.bound = _bind_device_plugins(cluster)
    _import_images(cluster, built)
    # virt-operator runs on control-plane nodes only (its required node affinity), as
    # kubeadm labels them: this node carries the control plane.
    _kubectl(cluster, "label", "node", cluster.node_name, f"{CONTROL_PLANE_LABEL}=", "--overwrite")
    kv.timings["images imported"] = round(time.monotonic() - begin, 1)
    now = time.monotonic()
    _kubectl(cluster, "apply", "-f", str(built.operator_manifest), timeout=120)
    _wait(
        cluster,
        "virt-operator",
        lambda: _condition(cluster, "deployment", "virt-operator", NAMESPACE, "Available"),
        timeout,
    )
    kv.timings["virt-operator Available"] = round(time.monotonic() - now, 1)
    now = time.monotonic()
    _kubectl(cluster, "apply", "-f", "-", input=json.dumps(kubevirt_cr(built, cluster)))
    _wait(
        cluster,
        "KubeVirt",
        lambda: _condition(cluster, "kubevirt", "kubevirt", NAMESPACE, "Available"),
        timeout,
    )
    kv.timings["KubeVirt Available"] = round(time.monotonic() - now, 1)
    kv.timings["install"] = round(time.monotonic() - begin, 1)


def stop_machines(
    cluster: NodeCluster, namespace: str | None = None, timeout: float = 120, wait: bool = True
) -> None:
    """Stop every VMI (of `namespace`, else of the cluster) at once, and (`wait`) wait
    until their virt-launcher Pods are gone. A VM powered off or deleted stops its guest gracefully,
    for up to the VMI's `terminationGracePeriodSeconds` (180 s unless set, as in the VMs
    #927 renders): the marker guest has no ACPI, so it would run out that time."""
    where = ["-n", namespace] if namespace else ["-A"]
    _kubectl(cluster, "delete", "vmi", "--all", *where, "--grace-period=0", "--force",
             "--wait=false", check=False)  # fmt: skip

    def launchers_gone() -> bool:
        if namespace is None:  # every namespace: a form kubectl answers
            found = _kubectl(cluster, "get", "pods", "-A", "-l", LAUNCHER_SELECTOR,
                             "-o", "name", check=False)  # fmt: skip
            return not found.strip()
        listed = find_json(cluster.plane, "pods", "-n", namespace, "-l", LAUNCHER_SELECTOR)
        return listed is not None and not listed["items"]

    if wait:
        _wait(cluster, "the VMs' launcher Pods gone", launchers_gone, timeout)


def uninstall(kv: KubeVirtInstall) -> None:
    """Remove the CR (the operator removes its components), then the operator's manifest,
    then the node's control-plane label (`clean_host` does the host)."""
    cluster, begin = kv.cluster, time.monotonic()
    try:
        if cluster.plane.is_running("kube-apiserver"):
            _kubectl(
                cluster,
                "delete",
                "kubevirt",
                "kubevirt",
                "-n",
                NAMESPACE,
                "--ignore-not-found",
                "--wait=true",
                "--timeout=180s",
                timeout=200,
            )
            _kubectl(
                cluster,
                "delete",
                "-f",
                str(kv.built.operator_manifest),
                "--ignore-not-found",
                "--wait=true",
                "--timeout=120s",
                timeout=150,
            )
            # the node as it was for the modules after this one
            _kubectl(cluster, "label", "node", cluster.node_name, f"{CONTROL_PLANE_LABEL}-")
    finally:
        kv.timings["uninstall"] = round(time.monotonic() - begin, 1)


def clean_host(kv: KubeVirtInstall) -> None:
    """After `uninstall`, before the cluster stops: what virt-handler left on the host
    (folders, its device plugins' sockets), the device-plugins binding, `/` as it was."""
    if kv.bound is not None:
        subprocess.run(["umount", "-l", str(kv.bound)], capture_output=True, check=False)
    for socket in Path(DEVICE_PLUGINS).glob("kubevirt-*.sock"):  # virt-handler's plugins
        socket.unlink()
    for path in HOST_LEFTOVERS:
        subprocess.run(["umount", "-R", path], capture_output=True, check=False)
        shutil.rmtree(path, ignore_errors=True)
    if kv.made_shared:
        subprocess.run(["mount", "--make-rprivate", "/"], check=True)


def remove(kv: KubeVirtInstall) -> None:
    """KubeVirt's VMs stopped at once (`stop_machines`), KubeVirt removed (`uninstall`) and
    the host cleaned (`clean_host`), the cluster still running."""
    try:
        stop_machines(kv.cluster)
        uninstall(kv)
    finally:
        clean_host(kv)
