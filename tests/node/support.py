"""Helpers of the node tier's tests: Pod manifests, kubectl shorthands, and the start
and stop times of every cluster (printed by conftest.py at the end of the run)."""

from __future__ import annotations

import json
import time
from typing import Any

from harness.kubeget import get_json
from harness.node import NodeCluster
from tests import records

# One node cluster runs on a machine at a time; a test waits this long for another's.
LOCK_WAIT_S = 240.0
# A module that sets this attribute True runs on a cluster of its own, or none (it starts
# its own), after the cluster the other modules share has stopped.
OWN_NODE_CLUSTER = "OWN_NODE_CLUSTER"
# Such a module's cluster has this many nodes when the module sets it (one otherwise).
NODE_COUNT = "NODE_COUNT"
# A module that sets this attribute True needs KubeVirt on the shared cluster (one of
# tests/node/sharing.py's BESIDE, run last of its group): installed in the background
# from the group's first module on, removed after its last (tests/node/conftest.py).
USES_KUBEVIRT = "USES_KUBEVIRT"
# A module that sets this attribute True restarts the node's kubelet or containerd: it runs
# last of the modules that share the cluster on the first worker (tests/conftest.py), its
# restarting test after the other workers' modules are done (`node_alone`).
RESTARTS_NODE = "RESTARTS_NODE"
TIMINGS: list[tuple[str, dict[str, float]]] = []
# What the tests measured (counts, times), one line each, printed at the end of the run.
FIGURES: list[str] = []


def record_timings(who: str, cluster: NodeCluster) -> None:
    """Keep a cluster's start and stop times for the summary at the end of the run (once
    it has stopped: its `timings` are complete then)."""
    TIMINGS.append((who, cluster.timings))
    records.record("cluster", who=who, timings=cluster.timings)


def record_figure(line: str) -> None:
    """Print a measured figure now (`-s`) and keep it for the summary at the end."""
    print(line)
    FIGURES.append(line)
    records.record("figure", line=line)


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
    found: dict[str, Any] = get_json(cluster, kind, name, "-n", namespace)
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
