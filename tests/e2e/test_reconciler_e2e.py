"""The reconciler against a real kube-apiserver: warm buffer, recycling, cooldown,
leader election, and a SIGKILL in the middle of a scale-up.

Jumpstarter's side is its 0.9.0 release: its controller issues the credentials and writes
the Exporters' conditions and `leaseRef`, its `jmp run` is each instance's exporter
(`tests.exporters`), and its `jmp` client leases and releases. Waits are bounded polls,
not timing assertions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import reconciler_args
from pool.model.keys import NAME_LABEL, SURPLUS_SINCE, instance_selector
from tests.census import watch_exporters
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    patch_spec,
    set_status,
    surplus_memory,
    virtual_target_class,
    wait_for,
)
from tests.exporters import ExporterProcesses


@pytest.fixture
def plane(control_plane: ControlPlane) -> ControlPlane:
    return control_plane


def make_pool(plane: ControlPlane, ns: str, name: str = "pool", **spec: Any) -> None:
    apply(plane, virtual_target_class("qemu", ns, parameters={"resources": {"cpu": 1}}))
    apply(
        plane,
        exporter_set(
            name, ns, class_name="qemu", labels={"board": name}, with_template=True, **spec
        ),
    )


def exporters(plane: ControlPlane, ns: str, name: str = "pool") -> list[dict[str, Any]]:
    items = get_json(plane, "exporters", "-n", ns, "-l", instance_selector(name))["items"]
    return [e for e in items if not e["metadata"].get("deletionTimestamp")]


def names(plane: ControlPlane, ns: str, name: str = "pool") -> list[str]:
    return sorted(e["metadata"]["name"] for e in exporters(plane, ns, name))


def pods(plane: ControlPlane, ns: str) -> list[str]:
    items = get_json(plane, "pods", "-n", ns)["items"]
    return sorted(p["metadata"]["name"] for p in items)


def available(plane: ControlPlane, ns: str) -> int:
    status = set_status(plane, ns)
    return int(status.get("availableReplicas") or 0)


def lease_holder(plane: ControlPlane, ns: str, lease: str) -> str | None:
    """The Exporter whose `status.leaseRef` Jumpstarter's controller set to `lease`."""
    for exporter in exporters(plane, ns):
        if ((exporter.get("status") or {}).get("leaseRef") or {}).get("name") == lease:
            return str(exporter["metadata"]["name"])
    return None


class Reconciler:
    """`virtualtarget reconcile` as a child process."""

    def __init__(self, plane: ControlPlane, ns: str, log: Path, *extra: str) -> None:
        self.log = log
        cli = reconciler_args(plane.kubeconfig)
        args = [
            sys.executable,
            "-m",
            "virtualtarget.cli",
            *cli,
            "--namespace",
            ns,
            "--leader-election-namespace",
            ns,
            "--lease-duration",
            "4",
            "--renew-deadline",
            "3",
            "--retry-period",
            "0.5",
            *extra,
        ]
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=log.open("ab"),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


@pytest.fixture
def start(plane: ControlPlane, ns: str, tmp_path: Path) -> Iterator[Callable[..., Reconciler]]:
    started: list[Reconciler] = []

    def run(*extra: str) -> Reconciler:
        reconciler = Reconciler(plane, ns, tmp_path / f"reconciler-{len(started)}.log", *extra)
        started.append(reconciler)
        return reconciler

    yield run
    for reconciler in started:
        reconciler.stop(signal.SIGKILL)


def test_warm_buffer_lease_replacement_recycling_and_cooldown(
    plane: ControlPlane,
    ns: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    start: Callable[..., Reconciler],
) -> None:
    make_pool(plane, ns, minAvailableReplicas=2, maxReplicas=4, scaleDownCooldown="2s")
    reconciler = start()
    first, second = wait_for(
        "two instances", lambda: len(names(plane, ns)) == 2 and names(plane, ns)
    )
    assert first.startswith("pool-") and second.startswith("pool-")  # generated names
    assert wait_for("their pods", lambda: pods(plane, ns) == [first, second])
    pod = get_json(plane, "pod", first, "-n", ns)
    assert "initContainers" not in pod["spec"]  # the default layout: QEMU in the exporter
    assert [c["name"] for c in pod["spec"]["containers"]] == ["exporter"]
    assert pod["spec"]["restartPolicy"] == "Never"
    config = get_json(plane, "secret", f"exporter-config-{first}", "-n", ns)
    assert config["metadata"]["ownerReferences"][0]["kind"] == "Exporter"
    assert config["metadata"]["labels"] == {NAME_LABEL: "pool"}
    assert pod["metadata"]["labels"][NAME_LABEL] == "pool"
    owner = get_json(plane, "exporter", first, "-n", ns)["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ExporterSet" and owner["controller"] is True

    # Their `jmp run` registered with Jumpstarter's controller, which marked them Online.
    status = wait_for(
        "two available",
        lambda: (s := get_json(plane, "exporterset", "pool", "-n", ns).get("status", {})).get(
            "availableReplicas"
        )
        == 2
        and s,
    )
    assert status["selector"] == "board=pool"
    assert {c["type"] for c in status["conditions"]} == {
        "Available",
        "Progressing",
        "Degraded",
        "ScalingLimited",
    }

    # Leased through Jumpstarter's client: its controller assigns an instance and writes
    # its leaseRef; a replacement keeps the buffer.
    jumpstarter.request_lease("board=pool", "lease-a")
    leased = wait_for("the lease assigned", lambda: lease_holder(plane, ns, "lease-a"))
    assert leased in (first, second)
    assert wait_for("a replacement", lambda: len(names(plane, ns)) == 3)
    assert wait_for("the buffer full again", lambda: available(plane, ns) == 2)

    # Released under ExitAndReplace: the instance goes, the pool refills to busy + W.
    jumpstarter.release_lease("lease-a")
    assert wait_for("the leased one recycled", lambda: leased not in names(plane, ns))
    # Its Pod goes in the same pass, by the delete after its Exporter's.
    assert wait_for("its Pod gone", lambda: leased not in pods(plane, ns))
    assert leased not in names(plane, ns)  # its name is never reused

    # Shrinking the warm buffer: the surplus goes after the (short) cooldown.
    patch_spec(plane, "exporterset", "pool", ns, minAvailableReplicas=1)
    assert wait_for("scale down to 1", lambda: len(names(plane, ns)) == 1, timeout=90)
    # A namespaced install keeps the memory in the set's Lease, never on the set itself.
    wait_for("surplus memory cleared", lambda: surplus_memory(plane, ns, "pool") == "")
    annotations = get_json(plane, "exporterset", "pool", "-n", ns)["metadata"].get(
        "annotations", {}
    )
    assert SURPLUS_SINCE not in annotations, annotations
    assert reconciler.stop() == 0, reconciler.text()


def test_two_reconcilers_elect_one_leader(
    plane: ControlPlane, ns: str, start: Callable[..., Reconciler]
) -> None:
    make_pool(plane, ns, minAvailableReplicas=1)
    first, second = start(), start()

    def leader_lease() -> Any:
        found = plane.kubectl(
            "get",
            "leases.coordination.k8s.io",
            "exporterset-reconciler",
            "-n",
            ns,
            "-o",
            "json",
            check=False,
        )
        return json.loads(found.stdout) if found.returncode == 0 else None

    holder = wait_for("a leader", leader_lease)["spec"]["holderIdentity"]
    assert wait_for("one instance", lambda: len(names(plane, ns)) == 1)
    leading = [r for r in (first, second) if "reconciling (" in r.text()]
    assert len(leading) == 1, [r.text() for r in (first, second)]
    follower = second if leading[0] is first else first
    # The follower may still be starting (imports on a busy machine): wait for its line.
    assert wait_for("the follower waits", lambda: "waiting for leadership" in follower.text())

    assert leading[0].stop() == 0  # graceful: releases the Lease

    def new_holder() -> bool:
        spec = get_json(plane, "leases.coordination.k8s.io", "exporterset-reconciler", "-n", ns)[
            "spec"
        ]
        return spec.get("holderIdentity") not in ("", None, holder)

    assert wait_for("the follower takes over", new_holder)
    assert wait_for("follower reconciles", lambda: "reconciling (" in follower.text())


def test_sigkill_mid_scale_leaves_no_duplicates(
    plane: ControlPlane, ns: str, start: Callable[..., Reconciler]
) -> None:
    make_pool(plane, ns, minReplicas=6, maxReplicas=6)
    watcher = watch_exporters(plane, ns, "-o", "name")
    first = start("--no-leader-election", "--workers", "1")
    try:
        assert watcher.stdout is not None
        watcher.stdout.readline()  # the first Exporter exists: kill in the middle of the pass
        first.stop(signal.SIGKILL)
    finally:
        watcher.kill()
        watcher.wait()
    partial = names(plane, ns)
    start("--no-leader-election")
    assert wait_for("six instances", lambda: len(names(plane, ns)) == 6), partial
    expected = names(plane, ns)
    assert set(partial) <= set(expected)  # the first process's creates were kept
    assert wait_for("six pods", lambda: pods(plane, ns) == expected)
    time.sleep(2)  # a few more passes: still exactly six (no duplicates, no churn)
    assert names(plane, ns) == expected and pods(plane, ns) == expected
