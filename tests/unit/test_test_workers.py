"""`make test`'s parallel workers: a module runs whole on one worker, and so does the node
tier (one node cluster a machine), or its parts on a worker each (tests/node/sharing.py),
whatever pytest and pytest-xdist lay out as node ids."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import _OTHER_TIERS_NICENESS, _niceness_for, _unit_of_work
from tests.node.sharing import BESIDE, FIRST_GROUP, group_of, split

REPO = Path(__file__).resolve().parents[2]
GROUPS = sorted(set(BESIDE.values()))
BESIDE_IDS = {
    group: f"tests/node/{next(m for m, g in BESIDE.items() if g == group)}::test_a"
    for group in GROUPS
}
BESIDE_ID = BESIDE_IDS[FIRST_GROUP]
OWNERS_ID = "tests/node/test_cluster.py::test_ready"
ENOUGH = len(GROUPS) + 1  # a worker for every group and the owner


def test_the_node_tier_is_one_unit_and_every_other_module_one() -> None:
    for node_split in (False, True):
        for workers in (2, ENOUGH):
            assert _unit_of_work(OWNERS_ID, node_split, workers) == "node"
            assert _unit_of_work("tests/node/test_teardown.py::test_stop", node_split, workers) == (
                "node"
            )
            assert _unit_of_work("tests/e2e/test_rollout_e2e.py::test_a[x::y]", node_split,
                                 workers) == "tests/e2e/test_rollout_e2e.py"  # fmt: skip
    assert _unit_of_work(BESIDE_ID, False, ENOUGH) == "node"
    assert _unit_of_work(BESIDE_ID, True, 2) == "node-beside"


def test_each_group_beside_is_a_unit_where_the_run_has_a_worker_for_it() -> None:
    assert len(GROUPS) > 1
    for group, nodeid in BESIDE_IDS.items():
        assert group_of(nodeid, ENOUGH) == group
        assert _unit_of_work(nodeid, True, ENOUGH) == f"node-{group}"
        assert group_of(nodeid, ENOUGH - 1) == FIRST_GROUP  # too few: the groups are one


def test_the_node_tier_is_split_only_with_two_workers_and_both_kinds_of_module() -> None:
    both = [OWNERS_ID, BESIDE_ID, "tests/unit/test_lock.py::test_x"]
    assert split(both, 2) and split(both, 3)
    assert not split(both, 1)
    assert not split([BESIDE_ID, "tests/unit/test_lock.py::test_x"], 3)
    assert not split([OWNERS_ID], 3)
    assert not split([f"tests/e2e/{sorted(BESIDE)[0]}::test_a", OWNERS_ID], 3)  # not the tier's


def test_the_node_tier_runs_at_the_normal_priority_and_the_others_below_it() -> None:
    assert _niceness_for("tests/node/test_pools_node.py") == 0
    assert _niceness_for("tests/e2e/test_rollout_e2e.py") == _OTHER_TIERS_NICENESS > 0
    assert _niceness_for("tests/unit/test_lock.py") == _OTHER_TIERS_NICENESS


def test_the_priority_is_set_for_every_thread_of_the_worker() -> None:
    """Linux keeps a niceness per thread: a thread started before the change (a fixture's
    server, say) is set too."""
    script = """
import os, threading
from tests.conftest import _set_niceness
started, stop = threading.Event(), threading.Event()
threading.Thread(target=lambda: (started.set(), stop.wait())).start()
started.wait()
_set_niceness(7)
print(sorted({os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}))
stop.set()
"""
    run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    assert run.stdout.strip() == "[7]", run.stderr


def test_each_module_runs_on_one_worker() -> None:
    modules = ["tests/unit/test_lock.py", "tests/unit/test_module_paths.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope", "-v", "-p",
         "no:cacheprovider", *modules],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d+)\].*? PASSED (\S+?)::", run.stdout):
        workers[module].add(worker)
    assert set(workers) == set(modules)
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
