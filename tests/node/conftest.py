"""Fixtures for the node tier: a real single-node cluster on this machine (root).

Every test in this folder is marked `node`. The cluster is `harness.node`'s, the
one `make cluster` starts; it needs the binaries of `make control-plane` and Debian's
container packages, and fails (never skips) without them. How long each start and stop
took is printed at the end of the run.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.node import NodeCluster, running_node_cluster
from tests import records
from tests.node.support import LOCK_WAIT_S, record_timings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.node)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # What the workers recorded (tests/records.py): this process may have run none.
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


@pytest.fixture(scope="module")
def node_cluster(request: pytest.FixtureRequest) -> Iterator[NodeCluster]:
    """One cluster for a test module (one cluster runs on a machine at a time)."""
    with running_node_cluster(wait=LOCK_WAIT_S) as cluster:
        yield cluster
    record_timings(request.module.__name__.rsplit(".", 1)[-1], cluster)


@pytest.fixture
def namespace(node_cluster: NodeCluster) -> str:
    """A fresh namespace whose Pods can start (default ServiceAccount, root CA)."""
    name = f"t-{secrets.token_hex(4)}"
    node_cluster.kubectl("create", "namespace", name)
    node_cluster.wait_for_namespace(name)
    return name
