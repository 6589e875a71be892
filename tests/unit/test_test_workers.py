"""`make test`'s parallel workers: a module runs whole on one worker, and so does the node
tier (one node cluster a machine), or its two halves on two (tests/node/sharing.py),
whatever pytest and pytest-xdist lay out as node ids."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import _OTHER_TIERS_NICENESS, _niceness_for, _unit_of_work
from tests.node.sharing import BESIDE, split

REPO = Path(__file__).resolve().parents[2]
BESIDE_ID = f"tests/node/{sorted(BESIDE)[0]}::test_a"
OWNERS_ID = "tests/node/test_cluster.py::test_ready"


def test_the_node_tier_is_one_unit_and_every_other_module_one() -> None:
    for node_split in (False, True):
        assert _unit_of_work(OWNERS_ID, node_split) == "node"
        assert _unit_of_work("tests/node/test_teardown.py::test_stop", node_split) == "node"
        assert _unit_of_work("tests/e2e/test_rollout_e2e.py::test_a[x::y]", node_split) == (
            "tests/e2e/test_rollout_e2e.py"
        )
    assert _unit_of_work(BESIDE_ID, False) == "node"
    assert _unit_of_work(BESIDE_ID, True) == "node-beside"


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
