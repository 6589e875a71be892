"""Jumpstarter main's stack on the node, as its ExporterSet users run it: main's own e2e pool
(`e2e/manifests/exporterset-qemu-kind-x86_64.yaml` of main's controller tarball, its
images the ones `make jumpstarter-images` builds under the names it runs), leased with
main's client (`harness.main_client`) as main's e2e (`e2e/test/exporterset_qemu_test.go`)
leases it: lease by the template's `board` label, flash, power on to the marker, power off,
release; the released instance's exporter exits on the lease's end, and a successor takes
its place. Whichever controller fills the pool (main's exporter-set controller, or this
product under main's operator or on its own), the checks are main's e2e's own: the
Exporter `Online`, `Registered`, `exporterStatus: Available` with no lease; the instance
Pod Running and Ready, its runtime sidecar holding `qemu-system-x86_64`."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from harness.deploy_render import REPO
from harness.guest import GUESTS, build_guest
from harness.images import product_image
from harness.jumpstarter_build import MAIN_SOURCE
from harness.jumpstarter_images import MAIN_EXPORTERSET_CONTROLLER, build_image, release_file
from harness.main_client import client_python
from harness.main_images import EXPORTER as EXPORTER_IMAGE
from harness.main_images import MAIN_PYTHON_IMAGES, build_main_image
from harness.main_images import RUNTIME as RUNTIME_IMAGE
from harness.node import NodeCluster
from harness.nodeimages import import_archive
from tests.dropin import ACCOUNT
from tests.e2e.objects import get_json, wait_for
from tests.installpage import NODE_MAIN_OPERATOR, page_of
from tests.node.guest_support import ClientRun, monotonic, run_client
from tests.node.install import Install, figure, readers_checkout, readers_shell
from tests.node.lab import LAB, client, pool_available
from tests.node.support import record_figure

MANIFEST = "e2e/manifests/exporterset-qemu-kind-x86_64.yaml"
NODE_CLASS = REPO / "examples/node/pool/virtualtargetclass-qemu-node.yaml"
# Main's provisioner names OVMF for every x86_64 guest (`default_partitions`), but its QEMU
# driver looks for those files in the exporter's container, which has none (main's
# python/Containerfile installs no edk2): QEMU, in the runtime, starts with no pflash and
# boots SeaBIOS. So the guest is the SeaBIOS marker guest.
GUEST = GUESTS["bios"]
PFLASH = "if=pflash"  # what QEMU's command line holds when the driver found the firmware
# Where main's driver (b1f2bb4) keeps the guest's disk in the sidecar layout: the launcher
# socket's folder, the 100Mi `shared` volume (not the `disk` volume this product renders).
DISK = "file.filename=/shared/root"
RUNTIME, EXPORTER = "target-runtime", "exporter"  # qemu.go's container names
QEMU = "qemu-system-x86_64"  # what main's e2e finds in the runtime (qemu-guest-arch.sh)
Obj = dict[str, Any]


@dataclass(frozen=True)
class MainPool:
    """Main's e2e class and set, as its manifest has them."""

    klass: Obj
    exporter_set: Obj

    @property
    def selector(self) -> str:
        labels = self.exporter_set["spec"]["selector"]["matchLabels"]
        return ",".join(f"{k}={v}" for k, v in labels.items())

    def with_layout(self, layout: str) -> MainPool:
        klass = copy.deepcopy(self.klass)
        klass["spec"]["parameters"]["layout"] = layout
        return MainPool(klass, self.exporter_set)

    def documents(self) -> str:
        return yaml.safe_dump_all([self.klass, self.exporter_set])


JUMPSTARTER = "jumpstarter"  # the resource's name (examples/node/jumpstarter-main.yaml)
# the operator's labels on the controller's Deployment and Pods (sanitized provisioner)
POD_SELECTOR = f"component=exporterset-controller,provisioner={ACCOUNT.split('-exporterset-')[1]}"


def controller_pods(installed: Install) -> list[Obj]:
    """The Pods of the operator's Deployment for the QEMU provisioner."""
    items: list[Obj] = get_json(installed.cluster, "pods", "-n", LAB, "-l", POD_SELECTOR)["items"]
    return items


def installed_by_main_operator(
    cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Install:
    """docs/development.md's `node-main-operator` block as written on `cluster`: main's
    operator, controller and router, this product its QEMU exporter-set controller, and the
    node pool (`examples/node/pool/`) filled."""
    work = tmp_path_factory.mktemp("main-operator")
    tree = readers_checkout(work, cluster)
    done = Install(
        cluster, tree, readers_shell(tree, work), product_image(), started=time.monotonic()
    )
    done.run(NODE_MAIN_OPERATOR)
    page = page_of(NODE_MAIN_OPERATOR).name
    record_figure(figure(f"docs/{page} {NODE_MAIN_OPERATOR}", done.installed))
    wait_for("the node pool's instance Available", lambda: pool_available(done), 300)
    start = cluster.timings.get("start", 0)
    record_figure(
        f"main's operator: empty cluster -> first instance Available "
        f"{time.monotonic() - done.started + start:.0f} s (cluster start {start:.0f} s)"
    )
    return done


def main_pool() -> MainPool:
    """Main's e2e class and set, the class trusting the CA of the node's Jumpstarter as the
    node's own class does (`NODE_CLASS`): without cert-manager main's operator publishes an
    empty `jumpstarter-service-ca-cert`, where main's e2e, on cert-manager, has the CA."""
    klass, exporter_set = (d for d in yaml.safe_load_all(release_file(MANIFEST, MAIN_SOURCE)) if d)
    assert klass["metadata"]["namespace"] == exporter_set["metadata"]["namespace"] == LAB
    node_class = yaml.safe_load(NODE_CLASS.read_text())
    klass["spec"]["caBundleConfigMapRef"] = node_class["spec"]["caBundleConfigMapRef"]
    return MainPool(klass, exporter_set)


def import_main_images(installed: Install, controller: bool = False) -> list[str]:
    """Main's exporter and runtime images (and its exporter-set controller's, with
    `controller`) built if they are not, and imported into the node's containerd."""
    archives = [build_main_image(image) for image in MAIN_PYTHON_IMAGES]
    if controller:
        archives.append(build_image(MAIN_EXPORTERSET_CONTROLLER))
    return [import_archive(installed.cluster.ctr, archive) for archive in archives]


def exporters(installed: Install, pool: MainPool) -> list[Obj]:
    found: list[Obj] = get_json(installed.cluster, "exporters", "-n", LAB, "-l", pool.selector)[
        "items"
    ]
    return [e for e in found if "deletionTimestamp" not in e["metadata"]]


def pods(installed: Install, pool: MainPool) -> list[Obj]:
    found: list[Obj] = get_json(installed.cluster, "pods", "-n", LAB, "-l", pool.selector)["items"]
    return found


def _free(exporter: Obj) -> bool:
    """Main's e2e `WaitForExporter`: Online and Registered, Available with no lease."""
    status = exporter.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return (
        conditions.get("Online") == "True"
        and conditions.get("Registered") == "True"
        and status.get("exporterStatus") == "Available"
        and not (status.get("leaseRef") or {}).get("name")
    )


def _ready(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return pod.get("status", {}).get("phase") == "Running" and all(s["ready"] for s in statuses)


def ready_instance(installed: Install, pool: MainPool, other_than: str = "") -> Obj | None:
    """The pool's one instance, free, its Pod Running and Ready (not the Exporter named
    `other_than`, which must be gone); None before."""
    found = exporters(installed, pool)
    if len(found) != 1 or found[0]["metadata"]["name"] == other_than:
        return None
    (exporter,) = found
    if not _free(exporter):
        return None
    name = exporter["metadata"]["name"]
    named = [p for p in pods(installed, pool) if p["metadata"]["name"] == name]
    return exporter if named and _ready(named[0]) else None


def wait_ready(installed: Install, pool: MainPool, timeout: float = 300) -> Obj:
    found: Obj = wait_for(
        f"{pool.selector}'s one instance free and its Pod Ready",
        lambda: ready_instance(installed, pool),
        timeout,
    )
    return found


def runtime_processes(installed: Install, pod: str) -> list[str]:
    """`ps -eo args=` in the instance's runtime sidecar, as main's e2e runs it (none once
    the Pod is gone)."""
    done = installed.cluster.kubectl(
        "exec", "-n", LAB, pod, "-c", RUNTIME, "--", "ps", "-eo", "args=", check=False
    )
    return str(done.stdout).splitlines() if done.returncode == 0 else []


@dataclass(frozen=True)
class Session:
    """A lease of main's client on the pool and what followed its release."""

    run: ClientRun
    leased: Obj  # the Exporter it held
    pod: Obj  # its Pod, as it was before the lease
    qemu: list[str]  # the runtime sidecar's QEMU processes seen during the lease
    successor: Obj
    successor_pod: Obj  # rendered by the controller of the way
    released_to_successor: float
    exporter_exit: Obj | None  # the leased Pod's exporter container's end, if seen

    def successor_start(self) -> str:
        """Its Pod created -> its exporter container started -> the Exporter Online."""
        created = _time(self.successor_pod["metadata"]["creationTimestamp"])
        statuses = self.successor_pod["status"].get("containerStatuses") or []
        (exporter,) = [c for c in statuses if c["name"] == EXPORTER]
        started = _time(exporter["state"]["running"]["startedAt"])
        conditions = self.successor["status"].get("conditions") or []
        (online,) = [c for c in conditions if c["type"] == "Online"]
        return (
            f"Pod created -> exporter started {started - created:.0f} s -> Online "
            f"{_time(online['lastTransitionTime']) - created:.0f} s"
        )

    def figures(self, way: str) -> str:
        run = self.run
        return (
            f"main's stack, {way}: lease request -> client holding it "
            f"{run.at('lease acquired') - run.at('lease requested'):.2f} s; flash "
            f"{(run.at('flashed') - run.at('flash started')):.1f} s; power-on -> marker "
            f"{run.boot_times()}; release -> successor "
            f"{self.successor['metadata']['name']} Available {self.released_to_successor:.1f} s"
            f" ({self.successor_start()}); the leased exporter's end: "
            f"{self.exporter_exit or 'not seen'}"
        )


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _terminated(pod: Obj, container: str) -> Obj | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status["name"] == container and "terminated" in (status.get("state") or {}):
            found: Obj = status["state"]["terminated"]
            return {k: found.get(k) for k in ("exitCode", "reason")}
    return None


def lease_and_release(installed: Install, pool: MainPool, tmp: Path, name: str) -> Session:
    """Main's client (a new Client `name`) leases the pool's instance, flashes the marker
    guest, boots it to the marker once, releases; then the pool's successor, free and
    Ready. Meanwhile the runtime sidecar's processes are read (main's e2e's `ps`), and the
    leased Pod is watched for its exporter's end (`exitOnLeaseEnd`)."""
    instance = wait_ready(installed, pool)
    leased = instance["metadata"]["name"]
    (pod,) = [p for p in pods(installed, pool) if p["metadata"]["name"] == leased]
    config = tmp / f"{name}.yaml"
    client(installed, name, config)
    result: list[ClientRun] = []
    guest, python = build_guest(GUEST), str(client_python())
    session = threading.Thread(
        target=lambda: result.append(
            run_client(config, pool.selector, guest, 1, tmp, python=python)
        ),
        daemon=True,
    )
    session.start()
    qemu: set[str] = set()
    while session.is_alive():
        qemu.update(line for line in runtime_processes(installed, leased) if QEMU in line)
        session.join(1.0)
    assert result, "the client session raised"
    (run,) = result
    assert run.code == 0, run.output
    assert run.first("lease acquired")["exporter"] == leased, run.output
    released = monotonic(run.at("releasing"))
    seen: list[Obj] = []

    def replaced() -> Obj | None:
        for found in pods(installed, pool):
            if found["metadata"]["name"] == leased and (ended := _terminated(found, EXPORTER)):
                seen[:] = [ended]
        return ready_instance(installed, pool, other_than=leased)

    successor = wait_for(f"{leased}'s successor free and Ready", replaced, 300)
    after = time.monotonic() - released
    name = successor["metadata"]["name"]
    (successor_pod,) = [p for p in pods(installed, pool) if p["metadata"]["name"] == name]
    return Session(
        run, instance, pod, sorted(qemu), successor, successor_pod, after,
        seen[0] if seen else None,
    )  # fmt: skip


def instance_layout(pod: Obj) -> dict[str, Any]:
    """What of main's sidecar layout the instance Pod has (qemu.go's `RenderPod`)."""
    spec = pod["spec"]
    init = {c["name"]: c for c in spec.get("initContainers") or []}
    (exporter,) = [c for c in spec["containers"] if c["name"] == EXPORTER]
    env = {e["name"]: e.get("value") for e in exporter.get("env") or []}
    copier = init.get("copy-jumpstarter-exec", {})
    return {
        "copied_to": _copied_to(copier.get("command") or []),
        "copies_from": copier.get("image"),
        "runtime_restart": init.get(RUNTIME, {}).get("restartPolicy"),
        "runtime_image": init.get(RUNTIME, {}).get("image"),
        "runtime_user": (init.get(RUNTIME, {}).get("securityContext") or {}).get("runAsUser"),
        "socket": env.get("JUMPSTARTER_LAUNCHER_SOCKET"),
        "command": exporter.get("command"),
    }


def _copied_to(command: list[str]) -> str:
    """The file `cp SOURCE TARGET` makes (TARGET a folder: the source's name in it)."""
    if len(command) != 3 or command[0] != "cp":
        return ""
    source, target = command[1:]
    return target + PurePosixPath(source).name if target.endswith("/") else target


# Main's (qemu.go's `RenderPod`), as far as every way must have it.
MAIN_RENDERS = {
    "copies_from": EXPORTER_IMAGE.name,
    "copied_to": "/shared/jumpstarter-exec",
    "runtime_restart": "Always",
    "runtime_image": RUNTIME_IMAGE.name,
    "runtime_user": 0,
    "socket": "/shared/launcher.sock",
    "command": ["jmp", "run", "--exporter-config", "/etc/jumpstarter/exporters/config.yaml"],
}


def _flat(value: Any, path: str = "") -> dict[str, Any]:
    """`value` as path -> leaf; lists of named things (containers, volumes, mounts, env)
    keyed by name, so that an order or an addition shows as itself."""
    if isinstance(value, dict):
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(_flat(item, f"{path}.{key}" if path else key))
        return found
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "name" in v for v in value)
    ):
        found = {}
        for item in value:
            found.update(_flat(item, f"{path}[{item['name']}]"))
        return found
    return {path: value}


# What the cluster, not the controller, puts in a Pod's spec: the ServiceAccount token's
# projected volume and its mounts, the scheduler's node, the admission plugins' defaults.
_CLUSTER_SET = ("kube-api-access-", "nodeName", "tolerations", "enableServiceLinks",
                "preemptionPolicy", "priority", "schedulerName", "terminationMessagePath",
                "dnsPolicy", "terminationGracePeriodSeconds", "serviceAccount")  # fmt: skip


def differences(pods: Iterable[tuple[str, Obj]]) -> list[str]:
    """Where the ways' instance Pods' specs differ: each path with every way's value (the
    instance's own name, and what the cluster sets, left out)."""
    named = [(way, pod["metadata"]["name"], _flat(pod["spec"])) for way, pod in pods]
    paths = sorted({path for _, _, flat in named for path in flat})
    found = []
    for path in paths:
        if any(part in path for part in _CLUSTER_SET):
            continue
        values = [
            (way, repr(flat.get(path, "-")).replace(name, "NAME")) for way, name, flat in named
        ]
        if len({value for _, value in values}) > 1:
            found.append(f"{path}: " + "; ".join(f"{way} {value}" for way, value in values))
    return found
