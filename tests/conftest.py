"""Test-wide settings.

Under CI (CI=true) hypothesis runs derandomized: a landing is judged on reproducible
examples, while every local run still explores new ones (and a failure found there is
kept as an explicit `@example`).

Parallel workers (`make test`: pytest-xdist, `--dist loadscope`): each test module is one
unit of work, so its module-scoped fixtures start once, and the whole node tier is one (it
holds the machine's one node cluster, tests/node/conftest.py); `pytest_xdist_make_scheduler`
below groups them. Modules are handed out longest tier first: node, chaos, e2e, image,
unit. Each loopback module starts its own control plane or takes a fresh namespace with its
own Jumpstarter controller, so no result depends on which worker ran what, or in which order.

The node tier is the run's longest stream and its guests and kubelets compete for the same
two cores as the rest: a worker runs every other module's tests (and what they start) at
a lower CPU priority, so the other tiers use what the node tier leaves idle rather than
slowing it down.

At the end the run prints, per part and per module, the wall time of its tests (setup
and teardown included) beside the CPU they used (this process and the children it
waited for), so the waits of a module stand out from its work.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# A worker that has used Jumpstarter's client in process (grpcio) later forks to start the
# node's processes (a pre-exec function forces fork): gRPC's fork handlers then ran in the
# child, and one kubelet start aborted (SIGABRT, "Epoll1Poller ... epoll_wait error: Bad
# file descriptor" in its log). No test needs gRPC across a fork.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
from xdist.scheduler import LoadScopeScheduling

from tests import records
from tests.node.sharing import group_of, runs_beside, split
from tests.node.support import OWN_NODE_CLUSTER, RESTARTS_NODE, USES_KUBEVIRT

# Hypothesis's too_slow health check is a timing check, and a loaded 2-core run trips it
# (1.1 s for a few inputs): the tests assert behaviour, not speed.
_UNTIMED = [HealthCheck.too_slow]
settings.register_profile("ci", derandomize=True, print_blob=True, suppress_health_check=_UNTIMED)
settings.register_profile("dev", print_blob=True, suppress_health_check=_UNTIMED)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")

# The order the parts are handed to workers: the longest first.
_TIERS = ("node", "chaos", "e2e", "image", "unit")


def _part(path: str | Path) -> str:
    parts = Path(path).parts
    tests = parts.index("tests") if "tests" in parts else -1
    return parts[tests + 1] if 0 <= tests < len(parts) - 2 else "other"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        records.start()


def _unit_of_work(nodeid: str, node_split: bool, workers: int) -> str:
    """The scope a worker runs whole: the node tier as one (where `node_split`, its modules
    of `sharing.BESIDE` apart, a unit per group: tests/node/sharing.py), every other module
    as one."""
    module = nodeid.split("::", 1)[0]
    if _part(module) != "node":
        return module
    if node_split and runs_beside(nodeid):
        return f"node-{group_of(nodeid, workers)}"
    return "node"


class _ByModule(LoadScopeScheduling):
    """Units of work handed out in the order of the collection (`pytest_collection_
    modifyitems` below), not xdist's by size: the node tier's first, so that its units
    start at once, a worker each."""

    def __init__(self, config: pytest.Config, log: Any) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)
        self._node_split: bool | None = None

    # Grouped here from the node id alone: xdist's own loadgroup marks the groups by
    # rewriting an attribute pytest 9 no longer reads, so they reach no scheduler.
    def _split_scope(self, nodeid: str) -> str:
        if self._node_split is None:  # the collection is whole when scopes are asked for
            self._node_split = split(self.collection or (), len(self.nodes))
        return _unit_of_work(nodeid, self._node_split, len(self.nodes))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    return _ByModule(config, log) if config.getvalue("dist") == "loadscope" else None


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Generator[None]:
    """A test that runs an entry point in-process (`webhook`, `reconcile`) configures the
    root logger with a handler on the stream pytest captured for that test, closed after
    it. Left in place, a later test's log record (urllib3's retry warnings) meets a closed
    stream and prints "--- Logging error ---" into that test's stderr."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {tier: n for n, tier in enumerate(_TIERS)}
    tests_of = Counter(item.path for item in items)

    def order(item: pytest.Item) -> tuple[int, ...]:
        if _part(item.path) != "node":  # the modules with the most tests first
            return 1, -tests_of[item.path], rank.get(_part(item.path), len(_TIERS))
        module = getattr(item, "module", None)
        # Of the node tier, the modules that share its cluster first (tests/node/conftest.py:
        # it starts and stops once), the one that restarts the node's kubelet last of those
        # the first worker runs (the second's are likely done by then); the modules beside
        # them next, KubeVirt's last (tests/node/sharing.py); then those that need the
        # machine to themselves.
        return (
            0,
            bool(getattr(module, OWN_NODE_CLUSTER, False)),
            runs_beside(item.nodeid),
            bool(getattr(module, USES_KUBEVIRT, False)),
            bool(getattr(module, RESTARTS_NODE, False)),
        )

    items.sort(key=order)


# The niceness of the workers' other tiers (0 for the node tier). At 10 a process gets about
# a tenth of a core that a niceness-0 process also wants, and all of one that it does not.
# At 19 (1/70 of a core) `make test` took 1,189 and 1,145 s instead of 1,249 s, but the
# loopback tiers starved while the node tier was busy: a chaos test's 200 Leases were not
# all served within its 120 s (2026-12-05, a fresh-clone CI run).
_OTHER_TIERS_NICENESS = 10


def _niceness_for(path: str | Path) -> int:
    return 0 if _part(path) == "node" else _OTHER_TIERS_NICENESS


def _set_niceness(niceness: int) -> None:
    """Every thread of this process (Linux sets niceness per thread), and so what they start
    from now on. Back to 0 needs root (CAP_SYS_NICE), as the node tier does: without it
    the process stays where it is."""
    for task in os.listdir("/proc/self/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(task), niceness)
        except ProcessLookupError:  # the thread has ended
            pass
        except PermissionError:
            return


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[Any]:
    if "PYTEST_XDIST_WORKER" in os.environ:
        _set_niceness(_niceness_for(item.path))
    started, began = _cpu(), time.time()
    try:
        return (yield)
    finally:
        # With when the test ran, and on which worker: what overlapped with what, for the
        # run's time budget (docs/measurements.md).
        records.record(
            "cpu",
            part=_part(item.path),
            module=item.path.name,
            seconds=_cpu() - started,
            worker=os.environ.get("PYTEST_XDIST_WORKER", ""),
            test=item.nodeid,
            start=began,
            end=time.time(),
        )


_WALL: dict[tuple[str, str], float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _WALL[(_part(report.fspath), Path(report.fspath).name)] += report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    _time_summary(terminalreporter)
    _node_summary(terminalreporter)
    _chaos_summary(terminalreporter)


def _chaos_summary(terminalreporter: Any) -> None:
    """How long each chaos test's system took to recover (`recovery` in tests/chaos)."""
    found = records.read("recovery")
    if found:
        terminalreporter.section("chaos: recovery figures")
    for entry in found:
        terminalreporter.write_line(
            f"{entry['test']:<58} {entry['what']:<52} {entry['seconds']:7.2f} s"
        )


def _node_summary(terminalreporter: Any) -> None:
    """The node tier's figures and cluster timings, as its workers recorded them (this
    process, which prints, loads no conftest of a tier under xdist)."""
    figures = [entry["line"] for entry in records.read("figure")]
    clusters = [(entry["who"], entry["timings"]) for entry in records.read("cluster")]
    if figures:
        terminalreporter.section("node tier: figures")
        for line in figures:
            terminalreporter.write_line(line)
    if not clusters:
        return
    terminalreporter.section("node cluster: start and stop times")
    for who, timings in clusters:
        start, stop = timings.get("start", 0.0), timings.get("stop", 0.0)
        phases = ", ".join(
            f"{k} {v:.1f} s" for k, v in timings.items() if k not in ("start", "stop")
        )
        terminalreporter.write_line(
            f"{who:<36} start {start:5.1f} s  stop {stop:5.1f} s  ({phases})"
        )


def _time_summary(terminalreporter: Any) -> None:
    if not _WALL:
        return
    cpu: dict[tuple[str, str], float] = defaultdict(float)
    for entry in records.read("cpu"):
        cpu[(entry["part"], entry["module"])] += entry["seconds"]
    parts: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (part, module), seconds in _WALL.items():
        parts[part][0] += seconds
        parts[part][1] += cpu.get((part, module), 0.0)
    terminalreporter.section("time per part (tests/<part>, setup and teardown included)")
    terminalreporter.write_line(f"{'part':<8} {'wall':>8} {'cpu':>8}")
    for part, (wall, used) in sorted(parts.items()):
        terminalreporter.write_line(f"{part:<8} {wall:7.1f}s {used:7.1f}s")
    terminalreporter.section("time per module (wall, cpu: longest first)")
    for (part, module), wall in sorted(_WALL.items(), key=lambda kv: -kv[1]):
        used = cpu.get((part, module), 0.0)
        terminalreporter.write_line(f"{wall:7.1f}s {used:7.1f}s  {part}/{module}")
