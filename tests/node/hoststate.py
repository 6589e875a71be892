"""What a node cluster changes on the host, as seen from outside, to compare the machine
before a cluster and after it stopped (tests/node/test_teardown.py, test_two_nodes.py).
Both are looked at while no cluster runs: holding the machine's node-cluster lock (one
cluster at a time), so another run's cluster is not taken for this one's, unless the
caller's own stopped cluster still holds it."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from harness.nodehost import (
    HOST_DIRS,
    KUBELET_SOCKET,
    MAX_NODES,
    NETWORK,
    POD_LOG_LINKS,
    TABLES,
    TOOLS,
    cgroup_leftovers,
    chains,
    kernel_settings,
    machine_lock,
    mounts_under,
    processes_of,
)
from tests.node.support import LOCK_WAIT_S

# Programs nobody else on the machine runs; any left after a stop would be the cluster's.
NODE_PROGRAMS = ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager")


def _program_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
            except OSError:
                continue
            if os.path.basename(argv0) in NODE_PROGRAMS:
                pids.add(int(entry.name))
    return pids


def host_state(*, lock: bool = True) -> dict[str, Any]:
    """What a cluster changes on the host, as far as it is visible from outside, while no
    cluster runs: under the machine's lock (waiting for another run's cluster to stop), or
    with `lock=False` where the caller's own stopped cluster still holds it."""
    if not lock:
        return _host_state()
    with tempfile.TemporaryDirectory() as nobody, machine_lock(Path(nobody), LOCK_WAIT_S):
        return _host_state()


def _host_state() -> dict[str, Any]:
    lo = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True,
                        text=True, check=True).stdout  # fmt: skip
    nodes = NETWORK.nodes(MAX_NODES)
    return {
        "chains": {f"{t} {table}": chains(t, table) for t in TOOLS for table in TABLES},
        "node addresses on lo": [n.node_ip for n in nodes if f" {n.node_ip}/32 " in lo],
        "bridges": [n.bridge for n in nodes if Path(f"/sys/class/net/{n.bridge}").exists()],
        "kernel settings (ip_forward, ...)": kernel_settings(),
        "Pod cgroups": cgroup_leftovers(),
        "pod log links": sorted(os.listdir(POD_LOG_LINKS)) if POD_LOG_LINKS.is_dir() else None,
        "kubelet socket": KUBELET_SOCKET.exists(),
        "host folders": {str(path): path.exists() for path in HOST_DIRS},
        "node programs": _program_pids(),
    }


def assert_clean(workdir: Path, before: dict[str, Any], *, lock: bool = True) -> None:
    """Nothing of the cluster in `workdir` is left: the host as `before` it started. The
    failure names each part that differs, with its value before and after (this helper
    module's asserts are not rewritten by pytest)."""
    if problems := leftovers(workdir, before, lock=lock):
        raise AssertionError("the host is not as before the cluster:\n" + "\n".join(problems))


def leftovers(workdir: Path, before: dict[str, Any], *, lock: bool = True) -> list[str]:
    """What of the cluster in `workdir` is left on the host, against `before` it started:
    each part that differs, with its value before and after."""
    after = host_state(lock=lock)
    problems = [
        f"{key}: before {was!r}, after {now!r}"
        for key, (was, now) in _differences(before, after).items()
    ]
    if left := after.pop("node programs") - before["node programs"]:
        problems.append(f"node programs still running: {sorted(left)}")
    if processes := processes_of(workdir):
        problems.append(f"processes of {workdir}: {processes}")
    if mounts := mounts_under(workdir):
        problems.append(f"mounts under {workdir}: {mounts}")
    return problems


def _differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each key whose value differs (node programs aside: fewer after is clean), a dict's
    own keys one by one, as `key` or `key / its key`."""
    found: dict[str, tuple[Any, Any]] = {}
    for key in sorted((before.keys() | after.keys()) - {"node programs"}):
        was, now = before.get(key), after.get(key)
        if isinstance(was, dict) and isinstance(now, dict):
            found |= {f"{key} / {k}": pair for k, pair in _differences(was, now).items()}
        elif was != now:
            found[key] = (was, now)
    return found
