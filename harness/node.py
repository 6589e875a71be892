"""A real Kubernetes cluster of one node (or a few) on this machine, for `make cluster` and
tests/node.

etcd and kube-apiserver come from `harness.controlplane` (same ports, tokens, logs
and process handling), bound to the first node's IP instead of 127.0.0.1; beside them run
kube-controller-manager, kube-scheduler, per node a kubelet with Debian's containerd and
runc and a CNI bridge (`harness.nodeworker`), and one kube-proxy in iptables mode. Every
node is in the host's network namespace, and kube-proxy's rules are that namespace's: one
kube-proxy serves them all (two would rewrite the same chains). Everything the cluster
keeps lives in one work folder; what it changes on the host is recorded and undone by
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
import datetime as dt
import functools
import ipaddress
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
from concurrent.futures import ThreadPoolExecutor
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
from harness.kubeget import find_json
from harness.kubevirt_build import DEBIAN_PACKAGES as KUBEVIRT_PACKAGES
from harness.nodehost import (
    MAX_NODES,
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
    normalize,
    pause_archive,
)
from harness.nodeworker import NODE_NAME, Node, die_with_parent, node_name

__all__ = [
    "DEBIAN_PACKAGES",
    "NODE_BINARIES",
    "NODE_NAME",
    "NodeCluster",
    "NodeError",
    "attached_node_cluster",
    "running_node_cluster",
]

NODE_BINARIES = ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
# The Debian packages the node tier needs (`.ci/run` installs these when missing), and the
# programs from them the harness runs; gcc and libc6-dev build the pause binary; the
# marker guest the tier boots is built with the guest's (`harness.guest`), KubeVirt with
# `harness.kubevirt_build`'s (libvirt-dev for virt-launcher's cgo, debootstrap).
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
            *KUBEVIRT_PACKAGES,
        )
    )
)
HOST_PROGRAMS = ("containerd", "ctr", "runc", "umoci", "gcc", "strip", "iptables")
CNI_BIN = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")
READY_TIMEOUT_S = 120.0
FRONT_PROXY_CLIENT = "front-proxy-client"


class NodeError(RuntimeError):
    """The node cluster could not start or stop cleanly; the message says what and where."""


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
    """A started cluster; use `running_node_cluster()` to get one. `network`, `node_name`,
    `containerd_socket` and `ctr` are the first node's, where the control plane is."""

    workdir: Path
    plane: ControlPlane
    ledger: Ledger
    network: Network = NETWORK
    nodes: list[Node] = field(default_factory=list)
    # what each start and stop phase took, in seconds, in order
    timings: dict[str, float] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # "pause", "busybox" -> name
    _ports: dict[str, int] = field(default_factory=dict)
    _stopped: bool = False
    # every (archive, name) imported: a node that comes back gets those it missed
    _archives: list[tuple[Path, str | None]] = field(default_factory=list)

    # -- paths ------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def node_name(self) -> str:
        return self.nodes[0].name

    @property
    def node_names(self) -> list[str]:
        return [node.name for node in self.nodes]

    @property
    def containerd_socket(self) -> Path:
        return self.nodes[0].containerd_socket

    @property
    def ctr(self) -> list[str]:
        """The `ctr` command for the first node's containerd, in the CRI's namespace."""
        return self.nodes[0].ctr

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node {name}; the nodes are {', '.join(self.node_names)}")

    def _path(self, *parts: str) -> Path:
        path = self.workdir.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    # -- start ------------------------------------------------------------------------

    def _phase(self, name: str, started: float) -> None:
        self.timings[name] = round(time.monotonic() - started, 1)

    def start(self) -> None:
        begin = time.monotonic()
        for node in self.nodes:
            self.ledger.add_address(node.network)
        self.ledger.add_guard(self.network, len(self.nodes))  # before any Service or Pod
        now = time.monotonic()
        self._phase("host (address, guard)", begin)
        self._write_pki()
        archives = self._build_images()
        self._phase("images built (pause, busybox)", now)
        now = time.monotonic()
        for node in self.nodes:
            node.sandbox_image = self.images["pause"]
            node.start_containerd(self._wait_briefly)
        for archive, name in archives:
            self.import_image(archive, name)
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
        for node in self.nodes:
            node.start_kubelet(self._component_kubeconfig(f"system:node:{node.name}"))
        self._start_kube_proxy()
        self._wait_nodes()
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
        # The front proxy's (kubeadm's names): the apiserver authenticates itself to
        # aggregated API servers (KubeVirt's virt-api) with this client certificate, and
        # they check it against the CA it publishes in extension-apiserver-authentication.
        proxy_ca = new_ca("front-proxy-ca", now=now)
        proxy = issue(proxy_ca, [FRONT_PROXY_CLIENT], now=now, client=True)
        for name, issued in (
            ("ca", ca),
            ("apiserver", serving),
            ("kubelet-client", client),
            ("front-proxy-ca", proxy_ca),
            ("front-proxy-client", proxy),
        ):
            self._path("pki", f"{name}.crt").write_bytes(issued.cert_pem)
            key = self._path("pki", f"{name}.key")
            key.write_bytes(issued.key_pem)
            key.chmod(0o600)

    def _pki(self, name: str) -> str:
        return str(self.workdir / "pki" / name)

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        self.plane.spawn(name, args, preexec_fn=die_with_parent)

    def _build_images(self) -> list[tuple[Path, str]]:
        """The pause and busybox archives; containerd is configured with the first's name."""
        built = [
            pause_archive(self.workdir / "images" / "pause"),
            busybox_archive(self.workdir / "images" / "busybox"),
        ]
        self.images = {"pause": built[0][1], "busybox": normalize(built[1][1])}
        return built

    def import_image(self, archive: Path, name: str | None = None) -> str:
        """Import a docker-archive into every node's containerd (a Pod may land on any;
        see `nodeimages.import_archive`); the name Pods can use with imagePullPolicy
        Never. A node that is down gets it when it comes back. The nodes import at once:
        each into its own containerd."""
        if (archive, name) not in self._archives:
            self._archives.append((archive, name))
        up = [node for node in self.nodes if node.up]

        def into(node: Node) -> str:
            return node.import_image(archive, name)

        with ThreadPoolExecutor(max_workers=len(up)) as pool:
            (imported,) = set(pool.map(into, up))
        return imported

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

    def _start_kube_proxy(self) -> None:
        net = self.network
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {
                "kubeconfig": self._component_kubeconfig("system:kube-proxy"),
            },
            "mode": "iptables",
            # Every node's Pods are the cluster's own (no masquerading for them).
            "clusterCIDR": self._pod_range(),
            # The first node's: one kube-proxy serves the host's network namespace, so a
            # Service's `Local` traffic policies see only the first node's endpoints.
            "hostnameOverride": self.node_name,
            "bindAddress": net.node_ip,
            "healthzBindAddress": f"{net.node_ip}:{self._port('kube-proxy-healthz')}",
            "metricsBindAddress": f"{net.node_ip}:{self._port('kube-proxy-metrics')}",
            # never on the machine's own NIC
            "nodePortAddresses": [f"{node.network.node_ip}/32" for node in self.nodes],
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

    def _pod_range(self) -> str:
        """The smallest range holding every node's Pod range (kube-proxy takes one)."""
        ranges = [ipaddress.ip_network(node.network.pod_cidr) for node in self.nodes]
        covering = ranges[0]
        while not all(r.subnet_of(covering) for r in ranges):  # type: ignore[arg-type]
            covering = covering.supernet()
        return str(covering)

    def _wait_briefly(self, what: str, ready: Callable[[], bool]) -> None:
        self._wait(what, ready, timeout=30)

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

    def node_ready(self, name: str) -> str:
        """The Node's Ready condition's status: True, False, Unknown, or "" before there is
        one."""
        found = find_json(self.plane, "node", name)
        if found is None:
            return ""
        conditions = found["status"].get("conditions", [])
        return next((c["status"] for c in conditions if c["type"] == "Ready"), "")

    def _is_ready(self, name: str) -> bool:
        return self.node_ready(name) == "True"

    def _wait_nodes(self) -> None:
        for node in self.nodes:
            self._wait(f"node {node.name}", functools.partial(self._is_ready, node.name))
        proxy = f"http://{self.network.node_ip}:{self._ports['kube-proxy-healthz']}/healthz"
        self._wait("kube-proxy", lambda: self._answers(proxy))
        self.wait_for_namespace("default")

    def wait_for_namespace(self, namespace: str) -> None:
        """Until Pods can be made in `namespace`: its default ServiceAccount and the
        kube-root-ca.crt ConfigMap (the token volume) exist."""

        def has(kind: str, name: str) -> Callable[[], bool]:
            def check() -> bool:
                return find_json(self.plane, kind, name, "-n", namespace) is not None

            return check

        self._wait(f"ServiceAccount default in {namespace}", has("serviceaccount", "default"))
        self._wait(
            f"ConfigMap kube-root-ca.crt in {namespace}", has("configmap", "kube-root-ca.crt")
        )

    # -- use --------------------------------------------------------------------------

    def description(self) -> dict[str, Any]:
        """What another process on this machine needs to use this running cluster
        (`attached_node_cluster`), as JSON: its folder, its API server and tokens, how
        many nodes, the node images' names, what runs."""
        plane = self.plane
        return {
            "workdir": str(self.workdir),
            "server": {"address": plane.address, "port": plane.port, "token": plane.token},
            "ca": str(plane.ca_file),
            "tokens": plane.tokens,
            "binaries": {name: str(path) for name, path in plane.binaries.items()},
            "nodes": len(self.nodes),
            "images": self.images,
            "running": plane.running(),
        }

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, **kwargs)

    # -- a node lost and back ---------------------------------------------------------

    def kill_node(self, name: str) -> float:
        """Kill node `name` (not the first) as a crash does (`Node.kill`): its kubelet,
        containerd, shims and Pods' processes SIGKILLed, the node cut off. Its Node object
        stays, as after a real crash. Returns the time of the kill (`time.time()`)."""
        node = self.node(name)
        if node is self.nodes[0]:
            raise NodeError("node cluster: the first node's IP carries the control plane")
        if not node.up:
            raise NodeError(f"node cluster: node {name} is already down")
        killed = time.time()
        node.kill()
        return killed

    def return_node(self, name: str) -> None:
        """Bring a killed node back over its old state (`Node.start_again`) and wait until
        its Node is Ready again."""
        node = self.node(name)
        if node.up:
            raise NodeError(f"node cluster: node {name} is not down")
        node.start_again(self._wait_briefly, self._archives)
        self._wait(f"node {name} back", functools.partial(self._is_ready, name))

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
        if self.plane.is_running("kube-apiserver"):
            # A killed node's Pods would wait for their kubelet forever: they just go.
            for node in self.nodes:
                if not node.up:
                    attempt(f"forgetting {node.name}'s Pods", functools.partial(
                        self._delete_pods, "--force", "--grace-period=0",
                        f"--field-selector=spec.nodeName={node.name}",
                    ))  # fmt: skip
            if any(node.up for node in self.nodes):
                # Each kubelet stops its sandboxes through the CRI, which runs CNI DEL.
                attempt(
                    "deleting Pods",
                    functools.partial(self._delete_pods, "--all", "--grace-period=1"),
                )
        stop("kube-proxy")
        for node in self.nodes:
            stop(node.process("kubelet"))
        # Its chains go in the sweep; not `kube-proxy --cleanup`, which would also flush
        # every IPVS rule of the machine and load the ip_vs module where it can.
        for node in self.nodes:
            if self.plane.is_running(node.process("containerd")):
                attempt(node.process("containers"), node.remove_containers)
                stop(node.process("containerd"))
        stop("kube-apiserver")  # before etcd: it shuts down cleanly only with its store
        stop("etcd")
        self.plane.stop()  # closes the logs
        attempt("sweep", lambda: problems.extend(sweep(self.ledger, self.network)))
        self.timings["stop"] = round(time.monotonic() - begin, 1)
        if problems:
            raise NodeError("node cluster: not everything was undone: " + "; ".join(problems))

    def _delete_pods(self, *how: str) -> None:
        self.plane.kubectl(
            "delete", "pods", "--all-namespaces", *how,
            "--wait=true", "--timeout=60s", timeout=90,
        )  # fmt: skip


def attached_node_cluster(description: dict[str, Any]) -> NodeCluster:
    """The running cluster another process on this machine started and described
    (`NodeCluster.description`): kubectl, image imports and the nodes' addresses work as
    they do there; its processes, its stop and its host changes stay that process's (this
    object's `stop` does nothing)."""
    root, server = Path(description["workdir"]), description["server"]
    plane = ControlPlane(
        workdir=root,
        port=server["port"],
        token=server["token"],
        binaries={name: Path(path) for name, path in description["binaries"].items()},
        address=server["address"],
        tokens=description["tokens"],
        ca_path=Path(description["ca"]),
        started_elsewhere=frozenset(description["running"]),
    )
    images = description["images"]
    members = [
        Node(network, plane, root, plane.ca_file, sandbox_image=images["pause"], up=True)
        for network in NETWORK.nodes(description["nodes"])
    ]
    return NodeCluster(
        workdir=root, plane=plane, ledger=Ledger(root), nodes=members, images=images, _stopped=True
    )


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
    workdir: Path | None = None, *, wait: float = 0.0, nodes: int = 1, shared_root: bool = False
) -> Iterator[NodeCluster]:
    """Start a cluster of `nodes` nodes in `workdir` (emptied first; a private temporary
    folder when None, removed afterwards); stop it and undo every host change on exit, also
    when the caller fails or the process is told to stop. One cluster runs on a machine at
    a time: wait up to `wait` seconds for another to stop. With `shared_root` (a cluster
    that is to run KubeVirt), `/` is rshared for its whole life (`Ledger.share_root`)."""
    if not 1 <= nodes <= MAX_NODES:
        raise NodeError(f"node cluster: 1 to {MAX_NODES} nodes, not {nodes}")
    binaries = require_binaries((*BINARIES, *NODE_BINARIES))
    binaries |= _require_host()
    if workdir is not None:
        with _running(workdir, binaries, wait, nodes, shared_root, fresh=True) as cluster:
            yield cluster
        return
    root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        with _running(root, binaries, wait, nodes, shared_root, fresh=False) as cluster:
            yield cluster
    finally:
        remove_folder(root)  # never through a mount: refused while one is left


@contextlib.contextmanager
def _running(
    root: Path,
    binaries: dict[str, Path],
    wait: float,
    nodes: int,
    shared_root: bool,
    *,
    fresh: bool,
) -> Iterator[NodeCluster]:
    root = root.resolve()
    with _stop_on_signals(), machine_lock(root, wait):
        if fresh:  # a folder of the caller's: emptied, once a killed run's are swept
            remove_folder(root)
        root.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(root)
        ledger.check_host(NETWORK)
        ledger.remember_host()
        if shared_root:
            ledger.share_root()
        net = NETWORK
        ca = root / "pki" / "ca.crt"
        plane = ControlPlane(
            workdir=root,
            port=0,  # chosen at start, once the node IP exists
            token=secrets.token_hex(16),
            binaries=binaries,
            address=net.node_ip,
            ca_path=ca,
            token_users={
                **{f"system:node:{node_name(n)}": ("system:nodes",) for n in range(1, nodes + 1)},
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
                "requestheader-client-ca-file": str(root / "pki" / "front-proxy-ca.crt"),
                "requestheader-allowed-names": FRONT_PROXY_CLIENT,
                "requestheader-username-headers": "X-Remote-User",
                "requestheader-group-headers": "X-Remote-Group",
                "requestheader-extra-headers-prefix": "X-Remote-Extra-",
                "proxy-client-cert-file": str(root / "pki" / "front-proxy-client.crt"),
                "proxy-client-key-file": str(root / "pki" / "front-proxy-client.key"),
            },
        )
        members = [Node(network, plane, root, ca) for network in net.nodes(nodes)]
        cluster = NodeCluster(workdir=root, plane=plane, ledger=ledger, nodes=members)
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
