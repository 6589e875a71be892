"""`make test`'s parallel workers: a module runs whole on one worker, and so does the node
tier (one node cluster a machine), whatever pytest and pytest-xdist lay out as node ids."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import _unit_of_work

REPO = Path(__file__).resolve().parents[2]


def test_the_node_tier_is_one_unit_and_every_other_module_one() -> None:
    assert _unit_of_work("tests/node/test_cluster.py::test_ready") == "node"
    assert _unit_of_work("tests/node/test_teardown.py::test_stop") == "node"
    assert _unit_of_work("tests/e2e/test_rollout_e2e.py::test_a[x::y]") == (
        "tests/e2e/test_rollout_e2e.py"
    )


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
