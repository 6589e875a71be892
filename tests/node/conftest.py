"""Fixtures for the node tier: a real single-node cluster on this machine (root).

Every test in this folder is marked `node`. The cluster is `virtualtarget.node`'s, the
one `make cluster` starts; it needs the binaries of `make control-plane` and Debian's
container packages, and fails (never skips) without them. How long each start and stop
took is printed at the end of the run.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from virtualtarget.node import NodeCluster, running_node_cluster

# One node cluster runs on a machine at a time; a test waits this long for another's.
LOCK_WAIT_S = 240.0
_TIMINGS: list[tuple[str, dict[str, float]]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.node)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TIMINGS:
        return
    terminalreporter.section("node cluster: start and stop times")
    for who, timings in _TIMINGS:
        start, stop = timings.get("start", 0.0), timings.get("stop", 0.0)
        phases = ", ".join(
            f"{k} {v:.1f} s" for k, v in timings.items() if k not in ("start", "stop")
        )
        terminalreporter.write_line(
            f"{who:<36} start {start:5.1f} s  stop {stop:5.1f} s  ({phases})"
        )


def record_timings(who: str, cluster: NodeCluster) -> None:
    """Keep a cluster's start and stop times for the summary at the end of the run."""
    _TIMINGS.append((who, cluster.timings))


@pytest.fixture(scope="module")
def node_cluster(request: pytest.FixtureRequest) -> Iterator[NodeCluster]:
    """One cluster for a test module (one cluster runs on a machine at a time)."""
    with running_node_cluster(wait=LOCK_WAIT_S) as cluster:
        record_timings(request.module.__name__.rsplit(".", 1)[-1], cluster)
        yield cluster


@pytest.fixture
def namespace(node_cluster: NodeCluster) -> str:
    """A fresh namespace whose Pods can start (default ServiceAccount, root CA)."""
    name = f"t-{secrets.token_hex(4)}"
    node_cluster.kubectl("create", "namespace", name)
    node_cluster.wait_for_namespace(name)
    return name


def busybox_pod(cluster: NodeCluster, name: str, command: str, **extra: Any) -> dict[str, Any]:
    """A Pod manifest running `command` with sh in the node's own busybox image."""
    return busybox_pod_named(cluster.images["busybox"], name, command, **extra)


def busybox_pod_named(image: str, name: str, command: str, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    container |= extra.pop("container", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": [container], **extra},
    }


def apply(cluster: NodeCluster, namespace: str, *objects: dict[str, Any]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(items))


def get(cluster: NodeCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    )
    return found


def wait_for_phase(
    cluster: NodeCluster, namespace: str, pod: str, phases: tuple[str, ...], timeout: float = 120
) -> dict[str, Any]:
    """Poll the Pod until its phase is one of `phases`; the Pod as last read."""
    deadline = time.monotonic() + timeout
    while True:
        found = get(cluster, namespace, "pod", pod)
        if found.get("status", {}).get("phase") in phases:
            return found
        if time.monotonic() > deadline:
            events = cluster.kubectl("get", "events", "-n", namespace, check=False).stdout
            raise AssertionError(
                f"Pod {pod} not {'/'.join(phases)} after {timeout:.0f}s: "
                f"{json.dumps(found.get('status'))}\n{events}"
            )
        time.sleep(0.5)
