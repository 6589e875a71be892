"""The node tier on up to three workers of `make test`: one starts the shared node cluster
and runs its modules there, the others run the modules of `BESIDE`, by group, on that same
cluster meanwhile.

The tier's modules mostly wait (guests booting, grace periods, Jumpstarter's polls): about
560 CPU-s in 1,200 s of wall, on one worker the run's longest stream. The modules of
`BESIDE` share the node without needing what the others need of it: their instances
request no CPU, or a tenth of a core (`TENTH_OF_A_CORE`, KubeVirt's virt-launchers), and
none restarts the node's kubelet or containerd. So other workers run them beside the
first, KubeVirt's install (tests/node/conftest.py) overlapping the others of its group.

The scheduler (tests/conftest.py) makes each group a unit of work of its own when `split()`
(two workers or more, and node modules of both kinds in the run) and the run has a worker
for every group beside the owner's (`group_of`); with fewer, the groups are one. Then

- the owner, the worker of the other node modules, starts the shared cluster as before
  and publishes its description (`NodeCluster.description`) in a folder of this run;
  before it stops that cluster (for a module on a cluster of its own, or at its end), and
  before a test that restarts the node's kubelet, it waits for every group's done mark;
- a worker beside it waits for the description, attaches (`attached_node_cluster`), runs
  its group's modules and marks the group done after the last.

Otherwise one process runs every node module on the one cluster, as before.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.node import NodeCluster, attached_node_cluster

__all__ = [
    "BESIDE",
    "FIRST_GROUP",
    "TENTH_OF_A_CORE",
    "Share",
    "group_of",
    "groups_of",
    "runs_beside",
    "share_of_run",
    "split",
    "workers_of",
]

# The modules other workers run on the shared cluster (file names in tests/node), each
# with its group: about 350 s (KubeVirt's install behind the first) and 300 s, beside the
# owner's 300 s (in CI at f70755a: demand 156 s, KubeVirt 155, first consumer 43; storage
# 119, guests by architecture 94, rollout 59, lease protection 33; pools 273, cluster 26).
FIRST_GROUP = "beside"
BESIDE = {
    "test_demand_node.py": FIRST_GROUP,
    "test_first_consumer_node.py": FIRST_GROUP,
    "test_kubevirt_node.py": FIRST_GROUP,
    "test_storage_node.py": "beside-2",
    "test_guests_arch_node.py": "beside-2",
    "test_rollout_node.py": "beside-2",
    "test_lease_protection_node.py": "beside-2",
}
# The class fields of a pool whose guests need not hold a core each (what is measured is
# their disk, their firmware or their lifecycle, not their speed): a tenth of a core, so
# that they fit on the 2-core node beside the owner's (KubeVirt's components and VMs
# among them).
TENTH_OF_A_CORE = {"scheduling": {"resources": {"requests": {"cpu": "100m"}}}}
_POLL_S = 0.5


def _module(nodeid: str) -> Path:
    return Path(nodeid.split("::", 1)[0])


def _is_node(nodeid: str) -> bool:
    folder = _module(nodeid).parent
    return folder.name == "node" and folder.parent.name == "tests"


def runs_beside(nodeid: str) -> bool:
    """Whether the test `nodeid` is in a module of `BESIDE`."""
    return _is_node(nodeid) and _module(nodeid).name in BESIDE


def split(nodeids: Iterable[str], workers: int) -> bool:
    """Whether a run of `nodeids` on `workers` workers runs the modules of `BESIDE` on
    workers of their own."""
    kinds = {runs_beside(nodeid) for nodeid in nodeids if _is_node(nodeid)}
    return workers >= 2 and kinds == {True, False}


def group_of(nodeid: str, workers: int) -> str:
    """The group of a module of `BESIDE`: its own where the run has a worker for every
    group and one for the owner, else the first (the groups then run as one)."""
    own = BESIDE[_module(nodeid).name]
    return own if workers > len(set(BESIDE.values())) else FIRST_GROUP


def groups_of(nodeids: Iterable[str], workers: int) -> frozenset[str]:
    """The groups a run of `nodeids` on `workers` workers has beside the owner."""
    return frozenset(group_of(n, workers) for n in nodeids if runs_beside(n))


@dataclass(frozen=True)
class Share:
    """The run's folder where the owner publishes its cluster and each group beside it
    marks done."""

    folder: Path
    groups: frozenset[str] = frozenset({FIRST_GROUP})

    @property
    def _cluster(self) -> Path:
        return self.folder / "cluster.json"

    def _done(self, group: str) -> Path:
        return self.folder / f"{group}.done"

    def publish(self, cluster: NodeCluster) -> None:
        self._write(self._cluster, {"cluster": cluster.description()})

    def publish_failure(self, error: BaseException) -> None:
        """The owner's cluster did not start: the other worker's modules fail with why."""
        self._write(self._cluster, {"error": f"{type(error).__name__}: {error}"})

    def attach(self, timeout: float) -> NodeCluster:
        """The owner's cluster, once published (within `timeout` seconds)."""
        published = self._wait(self._cluster, timeout, "no worker published the shared cluster")
        found = json.loads(published.read_text())
        if "error" in found:
            raise RuntimeError(f"the shared node cluster did not start: {found['error']}")
        return attached_node_cluster(found["cluster"])

    def mark_done(self, group: str = FIRST_GROUP) -> None:
        self._write(self._done(group), {"at": time.time()})

    def wait_done(self, timeout: float) -> float:
        """Until every group marked done; the seconds waited."""
        began = time.monotonic()
        deadline = began + timeout
        for group in sorted(self.groups):
            left = max(deadline - time.monotonic(), 0.0)
            self._wait(self._done(group), left, f"the modules of {group} did not finish")
        return time.monotonic() - began

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self, path: Path, content: dict[str, object]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(content))
        partial.replace(path)  # whole or absent for the reader

    def _wait(self, path: Path, timeout: float, what: str) -> Path:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} within {timeout:.0f} s (nothing at {path})")
            time.sleep(_POLL_S)
        return path


def workers_of(workerinput: dict[str, object] | None) -> int:
    """The run's workers (1 without pytest-xdist's)."""
    if workerinput is None:
        return 1
    workers = workerinput["workercount"]
    assert isinstance(workers, int)
    return workers


def share_of_run(workerinput: dict[str, object] | None, nodeids: Iterable[str]) -> Share | None:
    """This run's share when its node tier is split over workers (`split`); None when one
    process runs it all (no workers, one, or node modules of one kind)."""
    workers, nodeids = workers_of(workerinput), list(nodeids)
    if workerinput is None or not split(nodeids, workers):
        return None
    folder = Path(tempfile.gettempdir()) / f"virtualtarget-node-share-{workerinput['testrunuid']}"
    return Share(folder, groups_of(nodeids, workers))
