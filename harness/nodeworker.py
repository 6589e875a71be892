"""One node of the node cluster (`harness.node`): its containerd, with the CNI bridge, and
its kubelet, each with a folder, a bridge, a Pod range and an IP of its own.

The nodes share the host's network namespace, so one kube-proxy (the cluster's) serves
them all. A node that is not the first can be killed as a crash kills a machine and
started again over the same state (`kill`, `start_again`).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.controlplane import ControlPlane, free_port
from harness.nodehost import (
    Network,
    isolate,
    kill_node_processes,
    make_cgroup_root,
    rejoin,
)
from harness.nodeimages import import_archive

__all__ = ["NODE_NAME", "STOP_TIMEOUT_S", "Node", "die_with_parent", "node_name"]

NODE_NAME = "virtualtarget-node"  # the first node's; the others' end in -2, -3, ...
STOP_TIMEOUT_S = 20.0
PR_SET_PDEATHSIG = 1


def node_name(number: int) -> str:
    """Node `number`'s name (1 is the first)."""
    return NODE_NAME if number == 1 else f"{NODE_NAME}-{number}"


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting process goes away."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Node:
    """A node: `network` is its own (`Network.node`); the first node keeps its state in the
    cluster's folder, as a single-node cluster does, the others in `node-<n>` below it."""

    network: Network
    plane: ControlPlane
    cluster_dir: Path
    ca_file: Path  # the kubelet's client CA: the cluster's
    sandbox_image: str = ""
    up: bool = False  # its containerd started and not killed since
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def number(self) -> int:
        return self.network.index + 1

    @property
    def name(self) -> str:
        return node_name(self.number)

    @property
    def workdir(self) -> Path:
        return self.cluster_dir if self.number == 1 else self.cluster_dir / f"node-{self.number}"

    def process(self, program: str) -> str:
        """The name this node's `program` runs under (and its log's): `kubelet-2`."""
        return program if self.number == 1 else f"{program}-{self.number}"

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def ctr(self) -> list[str]:
        """The `ctr` command for this node's containerd, in the CRI's namespace."""
        return ["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io"]

    def _path(self, *parts: str) -> Path:
        path = self.workdir.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _spawn(self, program: str, args: list[str]) -> None:
        self.plane.spawn(self.process(program), args, program=program, preexec_fn=die_with_parent)

    def _port(self, name: str) -> int:
        self.ports[name] = free_port(self.network.node_ip)
        return self.ports[name]

    # -- start ------------------------------------------------------------------------

    def start_containerd(self, wait: Callable[[str, Callable[[], bool]], None]) -> None:
        """Write containerd's and the CNI bridge's configuration and start containerd;
        `wait(what, ready)` polls until it answers (failing when the plane fails)."""
        root = self.workdir / "containerd"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""\
version = 2
root = "{root / "root"}"
state = "{root / "state"}"

[grpc]
  address = "{self.containerd_socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"

[{cri}]
  sandbox_image = "{self.sandbox_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  Root = "{root / "runc"}"
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{self.workdir / "cni" / "net.d"}"
"""
        net = self.network
        conflist = {
            "cniVersion": "1.0.0",
            "name": net.cni_network,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": net.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # nothing leaves the machine, nothing to masquerade
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": net.pod_cidr, "gateway": net.gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.workdir / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
                {"type": "loopback"},
            ],
        }
        self._path("cni", "net.d", "10-node.conflist").write_text(json.dumps(conflist, indent=2))
        self._path("containerd", "config.toml").write_text(config)
        self._spawn("containerd", ["--config", str(root / "config.toml")])
        self.up = True
        self._wait_containerd(wait)

    def _wait_containerd(self, wait: Callable[[str, Callable[[], bool]], None]) -> None:
        wait(
            f"containerd of {self.name}",
            lambda: subprocess.run([*self.ctr, "version"], capture_output=True).returncode == 0,
        )

    def import_image(self, archive: Path, name: str | None = None) -> str:
        """Import a docker-archive into this node's containerd (`import_archive`), once:
        the node's folder records each archive (path, size, mtime) and name imported, with
        what the import returned, and containerd keeps its images over a crash. The
        processes that import here (the node tier's two workers, tests/node/sharing.py)
        take turns, so the second finds the first's record instead of reading the same
        archive again."""
        stat = archive.stat()
        key = json.dumps([str(archive.resolve()), stat.st_size, stat.st_mtime_ns, name])
        with self._path("containerd", "import.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            record = self.workdir / "containerd" / "imported.json"
            imported: dict[str, str] = json.loads(record.read_text()) if record.is_file() else {}
            if key not in imported:
                imported[key] = import_archive(self.ctr, archive, name)
                record.write_text(json.dumps(imported, indent=1))
        return imported[key]

    def start_kubelet(self, kubeconfig: str) -> None:
        net, root = self.network, self.workdir / "kubelet"
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.ca_file)},
            },
            "authorization": {"mode": "Webhook"},
            "address": net.node_ip,
            "port": self._port("kubelet"),
            "readOnlyPort": 0,
            "healthzBindAddress": net.node_ip,
            "healthzPort": self._port("kubelet-healthz"),
            "podLogsDir": str(root / "pod-logs"),
            "failSwapOn": False,
            "resolvConf": "",  # no DNS: the host's resolvers are outside the guard
            # A cluster's DNS settings, with no server: a lookup at the node IP is refused
            # at once. KubeVirt's masquerade DHCP server passes a Pod's search domains to
            # its guest and refuses "." (what a Pod gets with no cluster domain).
            "clusterDomain": "cluster.local",
            "clusterDNS": [net.node_ip],
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            # Nothing can be pulled again, so no image is ever removed.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
        }
        if self.number > 1:  # a cgroup tree of its own (`Network.cgroup`)
            make_cgroup_root(net.cgroup)
            config["cgroupRoot"] = f"/{net.cgroup}"
        path = self._path("kubelet.yaml")
        path.write_text(json.dumps(config, indent=2))
        self._spawn(
            "kubelet",
            [
                f"--config={path}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={root / 'root'}",
                f"--cert-dir={root / 'pki'}",
                f"--node-ip={net.node_ip}",
                f"--hostname-override={self.name}",
                "--v=1",
            ],
        )

    # -- a crash and a return ---------------------------------------------------------

    def kill(self) -> None:
        """Kill the node as a crash does: cut off first (`isolate`: nothing it sends or is
        sent gets through), then its kubelet and containerd, their shims and every process
        in its Pods' cgroups (the guests) with SIGKILL. Its state stays on disk: mounts,
        the Pods' network namespaces, containerd's and the kubelet's records."""
        isolate(self.network)
        self.up = False
        for program in ("kubelet", "containerd"):
            self.plane.kill(self.process(program), signal.SIGKILL)
        kill_node_processes(self.workdir, self.network.cgroup)

    def start_again(
        self, wait: Callable[[str, Callable[[], bool]], None], images: list[tuple[Path, str | None]]
    ) -> None:
        """Bring a killed node back over the same state: its network, containerd (which
        finds its dead shims and cleans up after them), the `images` imported while it
        was down, then its kubelet, as before."""
        rejoin(self.network)
        self.plane.restart(self.process("containerd"))
        self.up = True
        self._wait_containerd(wait)
        for archive, name in images:
            self.import_image(archive, name)
        self.plane.restart(self.process("kubelet"))

    # -- stop -------------------------------------------------------------------------

    def remove_containers(self) -> None:
        """SIGKILL and remove every task and container of this node's containerd."""

        def ids(kind: str) -> list[str]:
            result = subprocess.run([*self.ctr, kind, "ls", "-q"], capture_output=True, text=True)
            return result.stdout.split()

        for task in ids("tasks"):
            subprocess.run([*self.ctr, "tasks", "kill", "-s", "SIGKILL", task], capture_output=True)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for task in ids("tasks"):
            while time.monotonic() < deadline:
                done = subprocess.run([*self.ctr, "tasks", "rm", "-f", task], capture_output=True)
                if done.returncode == 0:
                    break
                time.sleep(0.2)
        for container in ids("containers"):
            subprocess.run([*self.ctr, "containers", "rm", container], capture_output=True)
