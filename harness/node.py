"""A real single-node Kubernetes cluster on this machine, for `make cluster` and tests/node.

etcd and kube-apiserver come from `harness.controlplane` (same ports, tokens, logs
and process handling), bound to the node's IP instead of 127.0.0.1; beside them run
kube-controller-manager, kube-scheduler, the kubelet with Debian's containerd and runc,
the CNI bridge, and kube-proxy in iptables mode. Everything the cluster keeps lives in
one work folder; what it changes on the host is recorded and undone by
`harness.nodehost` (the REJECT guard goes in before kube-apiserver starts).

What this kind of machine needs (each was a blocker until set):
- containerd `restrict_oom_score_adj`: root lacks CAP_SYS_RESOURCE, runc cannot lower
  oom_score_adj, and every sandbox would fail;
- kubelet `failCgroupV1: false` and the cgroupfs driver: the cgroup v1 + v2 hybrid
  counts as v1, and no systemd runs;
- kube-apiserver `--kubelet-preferred-address-types=InternalIP,Hostname`: the hostname
  resolves to 127.0.0.1, the kubelet listens on the node IP (logs and exec need it);
- the node IP is a /32 on `lo`: the kernel has no dummy device;
- no registry: the pause image is built here (`harness.nodeimages`), image garbage
  collection is off (nothing could be pulled again), Pods use imagePullPolicy Never.

The processes get SIGTERM if the process that started them dies (PR_SET_PDEATHSIG), and
the next start sweeps whatever such a death left (containers, mounts, rules).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import datetime as dt
import functools
import json
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from certs.authority import issue, new_ca
from harness.controlplane import (
    BINARIES,
    ControlPlane,
    ControlPlaneError,
    free_port,
    require_binaries,
)
from harness.guest import DEBIAN_PACKAGES as GUEST_PACKAGES
from harness.nodehost import (
    NETWORK,
    TEMP_PREFIX,
    HostError,
    Ledger,
    Network,
    machine_lock,
    remove_folder,
    sweep,
)
from harness.nodeimages import (
    ImageError,
    busybox_archive,
    import_archive,
    normalize,
    pause_archive,
)

__all__ = [
    "DEBIAN_PACKAGES",
    "NODE_BINARIES",
    "NODE_NAME",
    "NodeCluster",
    "NodeError",
    "running_node_cluster",
]

NODE_BINARIES = ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
# The Debian packages the node tier needs (`.ci/run` installs these when missing), and the
# programs from them the harness runs; gcc and libc6-dev build the pause binary; the
# marker guest the tier boots is built with the guest's (`harness.guest`).
DEBIAN_PACKAGES = tuple(
    dict.fromkeys(
        (
            "containerd",
            "runc",
            "containernetworking-plugins",
            "iptables",
            "umoci",
            "busybox-static",
            "gcc",
            "libc6-dev",
            *GUEST_PACKAGES,
        )
    )
)
HOST_PROGRAMS = ("containerd", "ctr", "runc", "umoci", "gcc", "strip", "iptables")
CNI_BIN = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")
NODE_NAME = "virtualtarget-node"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
PR_SET_PDEATHSIG = 1


class NodeError(RuntimeError):
    """The node cluster could not start or stop cleanly; the message says what and where."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting process goes away."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _require_host() -> dict[str, Path]:
    found: dict[str, Path] = {}
    missing = []
    for program in HOST_PROGRAMS:
        path = shutil.which(program)
        if path is None:
            missing.append(program)
        else:
            found[program] = Path(path)
    missing += [f"{CNI_BIN}/{name}" for name in CNI_PLUGINS if not (CNI_BIN / name).exists()]
    if missing:
        raise NodeError(
            f"node cluster: {', '.join(missing)} not found; "
            f"apt-get install -y --no-install-recommends {' '.join(DEBIAN_PACKAGES)}"
        )
    return found


@dataclass
class NodeCluster:
    """A started single-node cluster; use `running_node_cluster()` to get one."""

    workdir: Path
    plane: ControlPlane
    ledger: Ledger
    network: Network = NETWORK
    node_name: str = NODE_NAME
    # what each start and stop phase took, in seconds, in order
    timings: dict[str, float] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # "pause", "busybox" -> name
    _ports: dict[str, int] = field(default_factory=dict)
    _stopped: bool = False
    # archive, its size and mtime, the name -> what `import_image` returned: containerd keeps
    # an image for the cluster's life, so importing the same archive again is skipped.
    _imported: dict[tuple[Path, int, int, str | None], str] = field(default_factory=dict)

    # -- paths ------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

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

    # -- start ------------------------------------------------------------------------

    def _phase(self, name: str, started: float) -> None:
        self.timings[name] = round(time.monotonic() - started, 1)

    def start(self) -> None:
        begin = time.monotonic()
        self.ledger.add_address(self.network)
        self.ledger.add_guard(self.network)  # before any Service, Pod or kube-proxy
        now = time.monotonic()
        self._phase("host (address, guard)", begin)
        self._write_pki()
        archives = self._build_images()
        self._phase("images built (pause, busybox)", now)
        now = time.monotonic()
        self._start_containerd()
        for archive, name in archives:
            import_archive(self.ctr, archive, name)
        self._phase("containerd, images imported", now)
        now = time.monotonic()
        self.plane.port = free_port(self.network.node_ip)  # the node IP exists now
        self.plane.start()
        self.plane.kubectl(
            "create", "clusterrolebinding", "kube-apiserver-kubelet-client",
            "--clusterrole=system:kubelet-api-admin", "--user=kube-apiserver-kubelet-client",
        )  # fmt: skip
        self._phase("etcd, kube-apiserver", now)
        now = time.monotonic()
        self._start_controllers()
        self._start_kubelet()
        self._start_kube_proxy()
        self._wait_node()
        self._phase("node Ready, default ServiceAccount", now)
        self.timings["start"] = round(time.monotonic() - begin, 1)

    def _write_pki(self) -> None:
        now = dt.datetime.now(dt.UTC)
        ca = new_ca("virtualtarget-node-ca", now=now)
        net = self.network
        names = [
            net.node_ip,
            net.kubernetes_service_ip,
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ]
        serving = issue(ca, names, now=now)
        client = issue(ca, ["kube-apiserver-kubelet-client"], now=now, client=True)
        for name, issued in (("ca", ca), ("apiserver", serving), ("kubelet-client", client)):
            self._path("pki", f"{name}.crt").write_bytes(issued.cert_pem)
            key = self._path("pki", f"{name}.key")
            key.write_bytes(issued.key_pem)
            key.chmod(0o600)

    def _pki(self, name: str) -> str:
        return str(self.workdir / "pki" / name)

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        self.plane.spawn(name, args, preexec_fn=_die_with_parent)

    def _start_containerd(self) -> None:
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
  sandbox_image = "{self.images["pause"]}"
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
        self._wait(
            "containerd",
            lambda: subprocess.run([*self.ctr, "version"], capture_output=True).returncode == 0,
            timeout=30,
        )

    def _build_images(self) -> list[tuple[Path, str]]:
        """The pause and busybox archives; containerd is configured with the first's name."""
        built = [
            pause_archive(self.workdir / "images" / "pause"),
            busybox_archive(self.workdir / "images" / "busybox"),
        ]
        self.images = {"pause": built[0][1], "busybox": normalize(built[1][1])}
        return built

    def import_image(self, archive: Path, name: str | None = None) -> str:
        """Import a docker-archive into the node's containerd (see
        `nodeimages.import_archive`); the name Pods can use with imagePullPolicy Never."""
        stat = archive.stat()
        key = (archive.resolve(), stat.st_size, stat.st_mtime_ns, name)
        if key not in self._imported:
            self._imported[key] = import_archive(self.ctr, archive, name)
        return self._imported[key]

    def _component_kubeconfig(self, user: str) -> str:
        path = self.workdir / f"{user.replace(':', '-')}.kubeconfig"
        return str(self.plane.write_kubeconfig(path, user, self.plane.tokens[user]))

    def _port(self, name: str) -> int:
        self._ports[name] = free_port(self.network.node_ip)
        return self._ports[name]

    def _start_controllers(self) -> None:
        net, kcm = self.network, self._component_kubeconfig("system:kube-controller-manager")
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={kcm}",
                f"--authentication-kubeconfig={kcm}",
                f"--authorization-kubeconfig={kcm}",
                f"--bind-address={net.node_ip}",
                f"--secure-port={self._port('kube-controller-manager')}",
                f"--service-account-private-key-file={self.plane.service_account_key}",
                f"--root-ca-file={self._pki('ca.crt')}",  # so kube-root-ca.crt exists
                f"--cluster-signing-cert-file={self._pki('ca.crt')}",
                f"--cluster-signing-key-file={self._pki('ca.key')}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={net.service_cidr}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        sched = self._component_kubeconfig("system:kube-scheduler")
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={sched}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                f"--bind-address={net.node_ip}",
                f"--secure-port={self._port('kube-scheduler')}",
                "--leader-elect=false",
                "--v=1",
            ],
        )

    def _start_kubelet(self) -> None:
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
                "x509": {"clientCAFile": self._pki("ca.crt")},
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
        path = self._path("kubelet.yaml")
        path.write_text(json.dumps(config, indent=2))
        user = f"system:node:{self.node_name}"
        self._spawn(
            "kubelet",
            [
                f"--config={path}",
                f"--kubeconfig={self._component_kubeconfig(user)}",
                f"--root-dir={root / 'root'}",
                f"--cert-dir={root / 'pki'}",
                f"--node-ip={net.node_ip}",
                f"--hostname-override={self.node_name}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self) -> None:
        net = self.network
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {
                "kubeconfig": self._component_kubeconfig("system:kube-proxy"),
            },
            "mode": "iptables",
            "clusterCIDR": net.pod_cidr,
            "hostnameOverride": self.node_name,
            "bindAddress": net.node_ip,
            "healthzBindAddress": f"{net.node_ip}:{self._port('kube-proxy-healthz')}",
            "metricsBindAddress": f"{net.node_ip}:{self._port('kube-proxy-metrics')}",
            "nodePortAddresses": [f"{net.node_ip}/32"],  # never on the machine's own NIC
            # Leave the host's conntrack and route_localnet settings alone.
            "conntrack": {
                "maxPerCore": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"localhostNodePorts": False},
        }
        path = self._path("kube-proxy.yaml")
        path.write_text(json.dumps(config, indent=2))
        self._spawn("kube-proxy", [f"--config={path}", "--v=1"])

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.plane.check_alive()
            except ControlPlaneError as error:
                raise NodeError(f"node cluster: {error}") from None
            if ready():
                return
            time.sleep(0.25)
        raise NodeError(
            f"node cluster: {what} not ready after {timeout:.0f}s; logs in {self.workdir}"
        )

    def _answers(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _wait_node(self) -> None:
        def node_ready() -> bool:
            result = self.plane.kubectl("get", "node", self.node_name, "-o", "json", check=False)
            if result.returncode != 0:
                return False
            conditions = json.loads(result.stdout)["status"].get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        self._wait("the node", node_ready)
        proxy = f"http://{self.network.node_ip}:{self._ports['kube-proxy-healthz']}/healthz"
        self._wait("kube-proxy", lambda: self._answers(proxy))
        self.wait_for_namespace("default")

    def wait_for_namespace(self, namespace: str) -> None:
        """Until Pods can be made in `namespace`: its default ServiceAccount and the
        kube-root-ca.crt ConfigMap (the token volume) exist."""

        def has(kind: str, name: str) -> Callable[[], bool]:
            def check() -> bool:
                args = ("get", kind, name, "-n", namespace)
                return self.plane.kubectl(*args, check=False).returncode == 0

            return check

        self._wait(f"ServiceAccount default in {namespace}", has("serviceaccount", "default"))
        self._wait(
            f"ConfigMap kube-root-ca.crt in {namespace}", has("configmap", "kube-root-ca.crt")
        )

    # -- use --------------------------------------------------------------------------

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, **kwargs)

    # -- stop -------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything and undo every host change; raise NodeError naming what is
        left, after having tried every step."""
        if self._stopped:
            return
        self._stopped = True
        begin = time.monotonic()
        problems: list[str] = []

        def attempt(what: str, action: Callable[[], object]) -> None:
            began = time.monotonic()
            try:
                action()
            except Exception as error:  # every step runs; failures are reported at the end
                problems.append(f"{what}: {error}")
            self.timings[f"stop {what}"] = round(time.monotonic() - began, 1)

        def stop(name: str) -> None:
            if self.plane.is_running(name):
                attempt(name, functools.partial(self.plane.kill, name, signal.SIGTERM))

        stop("kube-controller-manager")  # first: nothing recreates the Pods deleted next
        stop("kube-scheduler")
        if self.plane.is_running("kubelet") and self.plane.is_running("kube-apiserver"):
            # The kubelet stops each sandbox through the CRI, which runs CNI DEL.
            attempt("deleting Pods", self._delete_pods)
        stop("kube-proxy")
        stop("kubelet")
        # Its chains go in the sweep; not `kube-proxy --cleanup`, which would also flush
        # every IPVS rule of the machine and load the ip_vs module where it can.
        if self.plane.is_running("containerd"):
            attempt("containers", self._remove_containers)
            stop("containerd")
        stop("kube-apiserver")  # before etcd: it shuts down cleanly only with its store
        stop("etcd")
        self.plane.stop()  # closes the logs
        attempt("sweep", lambda: problems.extend(sweep(self.ledger, self.network)))
        self.timings["stop"] = round(time.monotonic() - begin, 1)
        if problems:
            raise NodeError("node cluster: not everything was undone: " + "; ".join(problems))

    def _delete_pods(self) -> None:
        self.plane.kubectl(
            "delete", "pods", "--all", "--all-namespaces", "--grace-period=1",
            "--wait=true", "--timeout=60s", timeout=90,
        )  # fmt: skip

    def _remove_containers(self) -> None:
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


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so the cluster's teardown runs."""

    def leave(signum: int, _frame: FrameType | None) -> None:
        for sig in previous:  # once: the teardown that follows is not interrupted
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            with contextlib.suppress(ValueError):  # not the main thread: leave it
                previous[sig] = signal.signal(sig, leave)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def running_node_cluster(
    workdir: Path | None = None, *, wait: float = 0.0
) -> Iterator[NodeCluster]:
    """Start a single-node cluster in `workdir` (emptied first; a private temporary folder
    when None, removed afterwards); stop it and undo every host change on exit, also when
    the caller fails or the process is told to stop. One cluster runs on a machine at a
    time: wait up to `wait` seconds for another to stop."""
    binaries = require_binaries((*BINARIES, *NODE_BINARIES))
    binaries |= _require_host()
    if workdir is not None:
        with _running(workdir, binaries, wait, fresh=True) as cluster:
            yield cluster
        return
    root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        with _running(root, binaries, wait, fresh=False) as cluster:
            yield cluster
    finally:
        remove_folder(root)  # never through a mount: refused while one is left


@contextlib.contextmanager
def _running(
    root: Path, binaries: dict[str, Path], wait: float, *, fresh: bool
) -> Iterator[NodeCluster]:
    root = root.resolve()
    with _stop_on_signals(), machine_lock(root, wait):
        if fresh:  # a folder of the caller's: emptied, once a killed run's are swept
            remove_folder(root)
        root.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(root)
        ledger.check_host(NETWORK)
        ledger.remember_host()
        net = NETWORK
        plane = ControlPlane(
            workdir=root,
            port=0,  # chosen at start, once the node IP exists
            token=secrets.token_hex(16),
            binaries=binaries,
            address=net.node_ip,
            ca_path=root / "pki" / "ca.crt",
            token_users={
                f"system:node:{NODE_NAME}": ("system:nodes",),
                "system:kube-controller-manager": (),
                "system:kube-scheduler": (),
                "system:kube-proxy": (),
            },
            apiserver_flags={
                "cert-dir": None,
                "tls-cert-file": str(root / "pki" / "apiserver.crt"),
                "tls-private-key-file": str(root / "pki" / "apiserver.key"),
                "client-ca-file": str(root / "pki" / "ca.crt"),
                "authorization-mode": "Node,RBAC",
                "disable-admission-plugins": None,  # ServiceAccount admission: kcm runs
                "enable-admission-plugins": "NodeRestriction",
                "service-cluster-ip-range": net.service_cidr,
                "kubelet-client-certificate": str(root / "pki" / "kubelet-client.crt"),
                "kubelet-client-key": str(root / "pki" / "kubelet-client.key"),
                "kubelet-preferred-address-types": "InternalIP,Hostname",
                "allow-privileged": "true",
                # The apiserver calls webhook and aggregated APIs at their endpoints.
                "enable-aggregator-routing": "true",
            },
        )
        cluster = NodeCluster(workdir=root, plane=plane, ledger=ledger)
        atexit.register(cluster.stop)  # an interpreter leaving without unwinding
        try:
            try:
                cluster.start()
            except (ControlPlaneError, HostError, ImageError) as error:
                raise NodeError(f"node cluster: {error}") from error
            yield cluster
        finally:
            atexit.unregister(cluster.stop)
            cluster.stop()
