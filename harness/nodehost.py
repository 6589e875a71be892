"""What the node tier changes on the host, written down first so exactly that is undone.

A node cluster changes the machine outside its work folder: an address on `lo` and a
bridge per node, iptables chains (the guard below, kube-proxy's, the CNI plugins'),
cgroups, kernel settings the kubelet and the CNI bridge plugin set, a few host folders. Each
change is recorded in `<workdir>/host-changes.json` before it is made, and `sweep()`
undoes what the record names and what the cluster's own programs left behind. The
cluster's addresses are fixed (`NETWORK`); the start refuses when the machine already
has anything of the kind (another cluster's chains, a route into the range), so whatever
of the kind exists at teardown is the cluster's own.

A machine-wide lock (`/run/virtualtarget-node/lock`) lets one cluster run at a time, and
`/run/virtualtarget-node/current` names its work folder: a start that finds the lock free
but the name still there (the previous run was killed) sweeps that folder's leftovers
first.

The guard: the cluster may send traffic only to loopback and to its own bridges, Pod and
node addresses. Without kube-proxy's rules (before it starts, after it stops, or for a
ClusterIP no Service uses) a packet to a Service address would follow the default route
off the machine, so REJECT rules go in before kube-apiserver starts and come out last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "CHAIN_PREFIXES",
    "HOST_DIRS",
    "KUBELET_SOCKET",
    "MAX_NODES",
    "NETWORK",
    "POD_LOG_LINKS",
    "SYSCTLS",
    "TABLES",
    "TEMP_PREFIX",
    "TOOLS",
    "HostError",
    "Ledger",
    "Network",
    "cgroup_leftovers",
    "cgroup_pids",
    "chains",
    "isolate",
    "kernel_settings",
    "kill_node_processes",
    "machine_lock",
    "make_cgroup_root",
    "mounts_under",
    "processes_of",
    "rejoin",
    "remove_folder",
    "root_is_shared",
    "sweep",
    "unmount_under",
]

MACHINE_DIR = Path("/run/virtualtarget-node")
TEMP_PREFIX = "virtualtarget-node-"  # a cluster's private work folder in the temp folder
GUARD_PREFIX = "VTNODE-"
# Chains of the guard, of kube-proxy and the kubelet, and of the CNI portmap plugin.
CHAIN_PREFIXES = (GUARD_PREFIX, "KUBE-", "CNI-")
TABLES = ("filter", "nat", "mangle", "raw")
TOOLS = ("iptables", "ip6tables")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_NAME = "kubepods"  # the kubelet's pod cgroups, in every hierarchy (cgroupfs driver)
# Nodes a cluster may have; the sweep looks for the bridges, addresses and cgroups of each.
MAX_NODES = 4
# The programs the cluster runs; a leftover process is one of them naming the work folder.
PROGRAMS = frozenset(
    {
        "containerd",
        "containerd-shim-runc-v2",
        "runc",
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "kube-proxy",
    }
)
# Kernel settings the kubelet (setupKernelTunables), the CNI bridge plugin (ip_forward)
# and kube-proxy may change; each is put back to what it was before the start.
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# Host paths the kubelet, libcni and containerd's shims use whatever their configuration
# says: the kubelet's links to container logs, its device-plugin socket, libcni's
# result cache and the shims' sockets.
POD_LOG_LINKS = Path("/var/log/containers")
KUBELET_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
CNI_RESULTS = Path("/var/lib/cni/results")
SHIM_SOCKETS = Path("/run/containerd/s")
HOST_DIRS = (POD_LOG_LINKS, KUBELET_SOCKET.parent, CNI_RESULTS, SHIM_SOCKETS)


class HostError(RuntimeError):
    """The host is not fit for the cluster, or a change could not be made or undone."""


@dataclass(frozen=True)
class Network:
    """The cluster's addresses: one /16 no route of this machine may touch. As it stands,
    the first node's (its Pod range, IP, bridge); `node(index)` gives another node's."""

    cluster_range: str = "10.213.0.0/16"
    pod_cidr: str = "10.213.0.0/24"
    service_cidr: str = "10.213.128.0/24"
    node_ip: str = "10.213.255.1"
    bridge: str = "vtnode0"
    cni_network: str = "virtualtarget-node"
    index: int = 0  # which node these addresses are (0: the first)

    def node(self, index: int) -> Network:
        """The addresses of node `index` (0-based) of the cluster whose first node this is:
        the Pod range after the previous node's, the next node IP, its own bridge."""
        if not 0 <= index < MAX_NODES:
            raise ValueError(f"a node cluster has 1 to {MAX_NODES} nodes, not node {index + 1}")
        pods = ipaddress.ip_network(self.pod_cidr)
        first = int(pods.network_address) + index * pods.num_addresses
        return dataclasses.replace(
            self,
            pod_cidr=str(ipaddress.ip_network((first, pods.prefixlen))),
            node_ip=str(ipaddress.ip_address(self.node_ip) + index),
            bridge=f"{self.bridge.rstrip('0123456789')}{index}",
            cni_network=self.cni_network if index == 0 else f"{self.cni_network}-{index + 1}",
            index=index,
        )

    def nodes(self, count: int) -> list[Network]:
        return [self.node(index) for index in range(count)]

    @property
    def cgroup(self) -> str:
        """The top cgroup of this node's Pods, in every hierarchy: the kubelet's own
        `kubepods` for the first node; the bridge's name for the others, their kubelet's
        cgroupRoot with `kubepods` below it (a kubelet removes the Pod cgroups under its
        root that are not its own Pods', so two cannot share one)."""
        return CGROUP_NAME if self.index == 0 else self.bridge

    @property
    def gateway(self) -> str:
        """The bridge's address: the CNI bridge plugin takes the Pod range's first."""
        return str(ipaddress.ip_network(self.pod_cidr)[1])

    @property
    def kubernetes_service_ip(self) -> str:
        """The `kubernetes` Service's ClusterIP: the Service range's first address."""
        return str(ipaddress.ip_network(self.service_cidr)[1])


NETWORK = Network()


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise HostError(f"{' '.join(argv)} failed: {result.stderr.strip() or result.stdout}")
    return result


# -- what is there -------------------------------------------------------------------


def chains(tool: str, table: str) -> list[str]:
    """The user chains of `table` whose names start with one of CHAIN_PREFIXES."""
    result = _run(tool, "-w", "-t", table, "-S", check=False)
    if result.returncode != 0:  # this table does not exist for this family
        return []
    names = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("-N ")]
    return [name for name in names if name.startswith(CHAIN_PREFIXES)]


def _jumps(tool: str, table: str) -> list[list[str]]:
    """Rules (as `-S` prints them, without `-A`) whose target is one of our chains."""
    rules = []
    for line in _run(tool, "-w", "-t", table, "-S", check=False).stdout.splitlines():
        words = shlex.split(line)  # comments are quoted: "kubernetes service portals"
        if words[:1] == ["-A"] and "-j" in words:
            target = words[words.index("-j") + 1]
            if target.startswith(CHAIN_PREFIXES):
                rules.append(words[1:])
    return rules


def mounts_under(folder: Path) -> list[Path]:
    """Mount points at or below `folder`, deepest first."""
    root = str(folder.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")  # \\040 is a space
        if point == root or point.startswith(root + "/"):
            points.append(Path(point))
    return sorted(set(points), key=lambda p: len(p.parts), reverse=True)


def _hierarchies() -> list[Path]:
    if not CGROUP_ROOT.is_dir():
        return []
    if (CGROUP_ROOT / "cgroup.controllers").is_file():  # a pure cgroup v2 host
        return [CGROUP_ROOT]
    return sorted({path.resolve() for path in CGROUP_ROOT.iterdir() if path.is_dir()})


def _cgroup_dirs(names: Iterable[str] | None = None) -> list[Path]:
    """The Pod cgroup folders of the nodes (`names`: every possible node's), one per
    hierarchy."""
    wanted = [net.cgroup for net in NETWORK.nodes(MAX_NODES)] if names is None else names
    return [hierarchy / name for hierarchy in _hierarchies() for name in wanted
            if (hierarchy / name).is_dir()]  # fmt: skip


def cgroup_leftovers() -> list[Path]:
    return _cgroup_dirs()


def make_cgroup_root(name: str) -> None:
    """A node's cgroupRoot, in every hierarchy: the kubelet refuses a root that does not
    exist (the sweep removes it with the Pods' cgroups)."""
    for hierarchy in _hierarchies():
        (hierarchy / name).mkdir(exist_ok=True)


def cgroup_pids(names: Iterable[str] | None = None) -> set[int]:
    """The processes in the nodes' Pod cgroups (`names`: every possible node's)."""
    pids: set[int] = set()
    for top in _cgroup_dirs(names):
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(word) for word in procs.read_text().split())
    return pids


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def processes_of(workdir: Path) -> dict[int, str]:
    """Running processes of the cluster's programs whose command line names `workdir`."""
    marker = str(workdir.resolve()).encode()
    mine = _ancestors()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        program = os.path.basename(argv[0].decode(errors="replace"))
        if program in PROGRAMS and any(marker in arg for arg in argv):
            found[int(entry.name)] = program
    return found


def kernel_settings() -> dict[str, str]:
    """The current value of each of SYSCTLS that this kernel has."""
    values = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = (Path("/proc/sys") / name).read_text().strip()
    return values


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist (what creating it would add)."""
    for candidate in [*reversed(path.parents), path]:
        if not candidate.exists():
            return candidate
    return None


def _addresses_and_routes() -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    found: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
    for link in json.loads(_run("ip", "-j", "addr").stdout):
        for info in link.get("addr_info", []):
            net = ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", strict=False)
            found.append((f"address {info['local']}/{info['prefixlen']} on {link['ifname']}", net))
    for route in json.loads(_run("ip", "-j", "route", "show", "table", "all").stdout):
        dst = route.get("dst", "")
        if dst in ("", "default") or route.get("type") in ("broadcast",):
            continue
        with contextlib.suppress(ValueError):
            net = ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False)
            found.append((f"route {dst} dev {route.get('dev', '?')}", net))
    return found


# -- the record ------------------------------------------------------------------------


@dataclass
class Ledger:
    """The host changes of one cluster, saved after each entry (JSON in its work folder)."""

    workdir: Path
    addresses: list[str] = field(default_factory=list)  # node IPs the start added to lo
    sysctls: dict[str, str] = field(default_factory=dict)  # values before the start
    host_dirs: list[str] = field(default_factory=list)  # folders that did not exist
    root_made_shared: bool = False  # `/` was private and the start made it rshared

    @property
    def path(self) -> Path:
        return self.workdir / "host-changes.json"

    def save(self) -> None:
        data = asdict(self) | {"workdir": str(self.workdir)}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.path)

    @classmethod
    def load(cls, workdir: Path) -> Ledger:
        path = workdir / "host-changes.json"
        data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
        data["workdir"] = workdir
        if "address" in data:  # a record of a single-node harness, before `addresses`
            data["addresses"] = [address] if (address := data.pop("address")) else []
        return cls(**data)

    # -- changes, each recorded before it is made ------------------------------------

    def check_host(self, network: Network = NETWORK) -> None:
        """Refuse to start where the cluster's addresses or names are already in use."""
        if os.geteuid() != 0:
            raise HostError("the node cluster needs root (containerd, kubelet, iptables)")
        cluster = ipaddress.ip_network(network.cluster_range)
        clashes = [
            what
            for what, net in _addresses_and_routes()
            if net.version == cluster.version and cluster.overlaps(net)
        ]
        clashes += [
            f"network device {node.bridge}"
            for node in network.nodes(MAX_NODES)
            if Path(f"/sys/class/net/{node.bridge}").exists()
        ]
        for tool in TOOLS:
            for table in TABLES:
                clashes += [f"{tool} -t {table} chain {name}" for name in chains(tool, table)]
        clashes += [f"cgroup {path}" for path in _cgroup_dirs()]
        if clashes:
            raise HostError(
                f"this machine already has what the node cluster would make ({cluster} is "
                "its address range): " + "; ".join(clashes)
            )

    def remember_host(self) -> None:
        """Record the kernel settings and which host folders exist, before any change."""
        self.sysctls = kernel_settings()
        self.host_dirs = [str(top) for path in HOST_DIRS if (top := _first_missing(path))]
        self.save()

    def share_root(self) -> None:
        """`/` rshared for the cluster's life, as systemd makes it on other hosts, where it
        is private (no systemd here): for KubeVirt, whose virt-handler and virt-launcher
        mount with Bidirectional and HostToContainer propagation. Made so before any Pod,
        and private again only after the last one: a mount namespace made while `/` was
        shared keeps copies of the kubelet's later volume mounts once it is private again,
        and the kubelet cannot remove their folders ("device or resource busy")."""
        if root_is_shared():
            return
        self.root_made_shared = True
        self.save()
        _run("mount", "--make-rshared", "/")

    def add_address(self, network: Network = NETWORK) -> None:
        """A node's IP, a /32 on lo: this kernel has no dummy device, and lo is local."""
        self.addresses.append(network.node_ip)
        self.save()
        _run("ip", "addr", "add", f"{network.node_ip}/32", "dev", "lo")

    def add_guard(self, network: Network = NETWORK, nodes: int = 1) -> None:
        """REJECT what would leave loopback, the nodes' bridges and the Pods (see the
        docstring); the same rules for every node's bridge, Pod range and IP."""
        nets, cluster = network.nodes(nodes), network.cluster_range
        bridges = [net.bridge for net in nets]
        established = ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED"]
        # A chain per (table, built-in chain), jumped to first: VTNODE-<built-in>.
        v4 = {
            # Host to the cluster's range: only local addresses, Pods and the nodes. The
            # filter table sees a Service's DNAT but not the new route (`-o` is still the
            # default route's), so this goes by addresses, and conntrack names a Service
            # whose endpoint is not one of them.
            ("filter", "OUTPUT"): [
                ["-o", "lo", "-j", "RETURN"],
                *(["-d", net.pod_cidr, "-j", "RETURN"] for net in nets),
                *(["-d", f"{net.node_ip}/32", "-j", "RETURN"] for net in nets),
                ["-d", cluster, "-j", "REJECT"],
                ["-m", "conntrack", "--ctorigdst", cluster, "-j", "REJECT"],
            ],
            # Forwarding only from a bridge to a bridge (Pod to Pod, on one node or across
            # two, Service to Pod).
            ("filter", "FORWARD"): [
                *(["-i", a, "-o", b, "-j", "RETURN"] for a in bridges for b in bridges),
                *(["-i", br, "-j", "REJECT"] for br in bridges),
                *(["-o", br, "-j", "REJECT"] for br in bridges),
                ["-d", cluster, "-j", "REJECT"],
                ["-s", cluster, "-j", "REJECT"],
            ],
            # Pods reach only the nodes' cluster addresses (and answer the host: a reply
            # to a masqueraded Service connection is addressed back to the host's own
            # address by then); nothing from outside lo and the bridges reaches the cluster.
            ("filter", "INPUT"): [
                ["-i", "lo", "-j", "RETURN"],
                *(["-i", br, *established, "-j", "RETURN"] for br in bridges),
                *(["-i", br, "-d", cluster, "-j", "RETURN"] for br in bridges),
                *(["-i", br, "-j", "REJECT"] for br in bridges),
                ["-d", cluster, "-j", "REJECT"],
            ],
            # The last word, on the final route: nothing of the cluster's leaves by
            # another device (a Pod address while its bridge is not there yet, say).
            ("mangle", "POSTROUTING"): [
                ["-o", "lo", "-j", "RETURN"],
                *(["-o", br, "-j", "RETURN"] for br in bridges),
                ["-d", cluster, "-j", "DROP"],
                ["-s", cluster, "-j", "DROP"],
                ["-m", "conntrack", "--ctorigdst", cluster, "-j", "DROP"],
            ],
        }
        v6 = {  # the Pods have no IPv6 addresses: nothing of theirs passes
            ("filter", "INPUT"): [["-i", br, "-j", "REJECT"] for br in bridges],
            ("filter", "FORWARD"): [
                *(["-i", br, "-j", "REJECT"] for br in bridges),
                *(["-o", br, "-j", "REJECT"] for br in bridges),
            ],
        }
        for tool, rules in (("iptables", v4), ("ip6tables", v6)):
            for (table, parent), chain_rules in rules.items():
                chain = f"{GUARD_PREFIX}{parent}"
                _run(tool, "-w", "-t", table, "-N", chain)
                for rule in chain_rules:
                    _run(tool, "-w", "-t", table, "-A", chain, *rule)
                _run(tool, "-w", "-t", table, "-I", parent, "1", "-j", chain)


# -- a node cut off and killed, as by a crash -------------------------------------------


def _isolation(node: Network) -> list[tuple[str, list[str]]]:
    """DROP rules (built-in chain, rule) that make a node silent: nothing reaches its Pods
    or its IP, nothing of its Pods gets out (not even the resets of its dying sockets)."""
    return [
        ("INPUT", ["-i", node.bridge, "-j", "DROP"]),
        ("FORWARD", ["-i", node.bridge, "-j", "DROP"]),
        ("FORWARD", ["-o", node.bridge, "-j", "DROP"]),
        ("OUTPUT", ["-d", node.pod_cidr, "-j", "DROP"]),
        ("OUTPUT", ["-d", f"{node.node_ip}/32", "-j", "DROP"]),
    ]


def isolate(node: Network) -> None:
    """Cut a node off, first in the guard's chains (so the sweep takes the rules with them):
    a crashed machine drops what is sent to it and sends nothing, where a killed process's
    kernel would still answer (a reset, a refused connection)."""
    for parent, rule in _isolation(node):
        _run("iptables", "-w", "-t", "filter", "-I", f"{GUARD_PREFIX}{parent}", "1", *rule)


def rejoin(node: Network) -> None:
    """Take `isolate`'s rules out again."""
    for parent, rule in _isolation(node):
        chain = f"{GUARD_PREFIX}{parent}"
        while (
            _run("iptables", "-w", "-t", "filter", "-C", chain, *rule, check=False).returncode == 0
        ):
            _run("iptables", "-w", "-t", "filter", "-D", chain, *rule)


def kill_node_processes(workdir: Path, cgroup: str, timeout: float = 10.0) -> None:
    """SIGKILL the processes of a node's programs that name its folder (its kubelet,
    containerd and their shims) and every process in its Pods' cgroups, until none is
    left: a shim started its containers, but they outlive it."""
    deadline = time.monotonic() + timeout
    while pids := set(processes_of(workdir)) | cgroup_pids([cgroup]):
        if time.monotonic() > deadline:
            raise HostError(f"processes of the node in {workdir} outlived SIGKILL: {sorted(pids)}")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


# -- undoing ---------------------------------------------------------------------------


def _stop_pids(pids: dict[int, str], timeout: float = 10.0) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _unmount(point: Path) -> None:
    if _run("umount", str(point), check=False).returncode != 0:
        _run("umount", "-l", str(point), check=False)


def unmount_under(folder: Path) -> None:
    """Unmount everything mounted at or below `folder`, deepest first (lazily where busy)."""
    for point in mounts_under(folder):
        _unmount(point)


def remove_folder(folder: Path) -> None:
    """Delete a work folder, never through a mount: whatever is mounted below it (a
    volume, a container's root) is unmounted first, and the removal refused if any is left."""
    unmount_under(folder)
    left = mounts_under(folder)
    if left:
        raise HostError(f"not removing {folder}: still mounted there: {', '.join(map(str, left))}")
    shutil.rmtree(folder, ignore_errors=True)


def _remove_cgroups() -> None:
    pids = cgroup_pids()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and cgroup_pids():
        time.sleep(0.1)
    for top in _cgroup_dirs():
        _remove_empty_tree(top)


def _remove_chains() -> None:
    for tool in TOOLS:
        for table in TABLES:
            for rule in _jumps(tool, table):
                _run(tool, "-w", "-t", table, "-D", *rule, check=False)
            names = chains(tool, table)
            for name in names:
                _run(tool, "-w", "-t", table, "-F", name, check=False)
            for name in names:
                _run(tool, "-w", "-t", table, "-X", name, check=False)


def _remove_host_files(ledger: Ledger, network: Network) -> None:
    marker = str(ledger.workdir.resolve())
    if POD_LOG_LINKS.is_dir():
        for link in POD_LOG_LINKS.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(marker):
                link.unlink()
    KUBELET_SOCKET.unlink(missing_ok=True)  # one kubelet per machine: it was this one's
    # and so was the device manager's checkpoint, written once a device plugin registered
    (KUBELET_SOCKET.parent / "kubelet_internal_checkpoint").unlink(missing_ok=True)
    results = CNI_RESULTS
    names = "|".join(re.escape(node.cni_network) for node in network.nodes(MAX_NODES))
    cached = re.compile(rf"(?:{names})-([0-9a-f]{{64}})-eth0")  # a sandbox's id: 64 hex
    if results.is_dir():  # libcni's cache, left when a sandbox died without CNI DEL
        for entry in results.iterdir():
            if match := cached.fullmatch(entry.name):
                (results / f"cni-loopback-{match.group(1)}-lo").unlink(missing_ok=True)
                entry.unlink()
    _remove_stale_sockets(SHIM_SOCKETS)
    for name in ledger.host_dirs:
        _remove_empty_tree(Path(name))


def _remove_stale_sockets(folder: Path) -> None:
    """Remove the sockets in `folder` that nothing listens on any more: a shim killed with
    its node (SIGKILL, as a crash) leaves its socket file in SHIM_SOCKETS, which containerd
    uses whatever its configuration says. A live one refuses nothing, whichever network
    namespace its listener is in, so only the dead are removed."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.is_socket() and not _listened_on(entry):
            entry.unlink(missing_ok=True)


def _listened_on(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:  # busy, or not ours to judge: leave it
            return True
        return True


def _remove_empty_tree(folder: Path) -> None:
    """Remove `folder` and the folders in it, deepest first, as far as they are empty:
    something else may have started using one meanwhile."""
    if not folder.is_dir():
        return
    subs = sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for sub in [*subs, folder]:
        with contextlib.suppress(OSError):
            sub.rmdir()


def sweep(ledger: Ledger, network: Network = NETWORK) -> list[str]:
    """Undo everything of the cluster that is still there; each step runs even when an
    earlier one failed. Returns what could not be undone (empty when all is clean)."""
    problems: list[str] = []

    def step(what: str, action: Any) -> None:
        try:
            action()
        except Exception as error:  # every step is attempted; failures are reported
            problems.append(f"{what}: {error}")

    step("processes", lambda: _stop_pids(processes_of(ledger.workdir)))
    step("cgroups", _remove_cgroups)
    step("mounts", lambda: unmount_under(ledger.workdir))
    step("iptables", _remove_chains)
    for node in network.nodes(MAX_NODES):  # the start refused where one was there
        if Path(f"/sys/class/net/{node.bridge}").exists():
            step(f"bridge {node.bridge}", functools.partial(_run, "ip", "link", "del", node.bridge))
    for address in ledger.addresses:
        step(f"address {address}", functools.partial(_del_address, address))
    step("kernel settings", lambda: _restore_sysctls(ledger.sysctls))
    step("host folders", lambda: _remove_host_files(ledger, network))
    if ledger.root_made_shared:
        step("/ private again", functools.partial(_run, "mount", "--make-rprivate", "/"))
    problems += [
        f"{program} (pid {pid}) still runs" for pid, program in processes_of(ledger.workdir).items()
    ]
    problems += [f"still mounted: {point}" for point in mounts_under(ledger.workdir)]
    problems += [f"cgroup left: {path}" for path in _cgroup_dirs()]
    problems += [
        f"{tool} -t {table} chain {name} left"
        for tool in TOOLS
        for table in TABLES
        for name in chains(tool, table)
    ]
    return problems


def root_is_shared() -> bool:
    """Whether `/` is a shared mount (its propagation `shared`, maybe `shared,slave`)."""
    return _run("findmnt", "-n", "-o", "PROPAGATION", "/").stdout.strip().startswith("shared")


def _has_address(address: str) -> bool:
    return f" {address}/32 " in _run("ip", "-o", "addr", "show", "dev", "lo").stdout


def _del_address(address: str) -> None:
    if _has_address(address):
        _run("ip", "addr", "del", f"{address}/32", "dev", "lo")


def _restore_sysctls(before: dict[str, str]) -> None:
    now = kernel_settings()
    for name, value in before.items():
        if now.get(name) != value:
            (Path("/proc/sys") / name).write_text(value + "\n")


# -- one cluster at a time -------------------------------------------------------------


@contextlib.contextmanager
def machine_lock(workdir: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold the machine's node-cluster lock for `workdir` (waiting up to `wait` seconds
    for another cluster to stop); sweep a killed run's leftovers first. Raises HostError
    when another cluster still runs."""
    MACHINE_DIR.mkdir(parents=True, exist_ok=True)
    current = MACHINE_DIR / "current"
    handle: IO[str] = (MACHINE_DIR / "lock").open("a+")
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                holder = current.read_text().strip() if current.is_file() else "unknown"
                raise HostError(
                    f"another node cluster runs on this machine (work folder {holder}); "
                    "stop it first (Ctrl-C where `make cluster` runs)"
                ) from None
            time.sleep(1.0)
        if current.is_file():
            stale = Path(current.read_text().strip())
            ledger = Ledger.load(stale)
            if not ledger.path.is_file():  # the record went with its folder
                nodes = NETWORK.nodes(MAX_NODES)
                ledger.addresses = [n.node_ip for n in nodes if _has_address(n.node_ip)]
            problems = sweep(ledger)
            if problems:
                raise HostError(
                    f"a killed node cluster ({stale}) left what could not be removed: "
                    + "; ".join(problems)
                )
            if stale.parent == Path(tempfile.gettempdir()) and stale.name.startswith(TEMP_PREFIX):
                remove_folder(stale)  # a private folder nobody else will empty
        current.write_text(f"{workdir.resolve()}\n")
        try:
            yield
        finally:
            current.unlink(missing_ok=True)
    finally:
        handle.close()  # closing releases the lock
