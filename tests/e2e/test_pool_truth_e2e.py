"""The reconciler against a real kube-apiserver, saying what is true of a pool: a step the
apiserver refuses reaches the set's status (once, not per retry) and `virtualtarget plan`;
one pending Lease that two sets match makes one instance; each step is logged once, by
the pass that carried it out.

No webhook runs here (sets the webhook would refuse are the point of the first test).
Jumpstarter's released 0.9.0 controller serves each test's namespace: it issues the
credentials, and assigns the Leases the release's client asks for (`jmp create lease`) to
instances whose exporters, its `jmp run` (`tests.exporters`), registered with it. Waits
are bounded polls.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import ReconcilerProcess, running_reconciler
from pool.model.keys import LEASE_PROTECTION, REVISION, STANDBY_LABEL, instance_selector
from tests.census import Census
from tests.e2e.objects import (
    apply,
    assigned_exporter,
    exporter_set,
    find_json,
    get_json,
    set_status,
    virtual_target_class,
    wait_for,
)
from tests.exporters import ExporterProcesses
from tests.unit.test_webhook_pools import MOCK, deep_drivers

Obj = dict[str, Any]
CLI = (sys.executable, "-m", "virtualtarget.cli")


@pytest.fixture
def lab(control_plane: ControlPlane, ns: str) -> str:
    """The namespace Jumpstarter's controller serves, with a class."""
    apply(control_plane, virtual_target_class("qemu", ns))
    return ns


@pytest.fixture
def reconciler(
    control_plane: ControlPlane, lab: str, tmp_path: Path
) -> Iterator[ReconcilerProcess]:
    extra = ["--namespace", lab, "--no-leader-election"]
    with running_reconciler(control_plane, tmp_path, extra=extra) as process:
        yield process
        process.check_alive()


def create(plane: ControlPlane, body: Obj) -> None:
    """`kubectl create`: a set too large for `apply`'s last-applied annotation (256 KiB)."""
    plane.kubectl("create", "-f", "-", input=json.dumps(body))


def pool(name: str, ns: str, drivers: list[Obj], **spec: Any) -> Obj:
    body = exporter_set(
        name, ns, class_name="qemu", labels={"board": name}, with_template=True, **spec
    )
    body["spec"]["template"]["spec"] = {"drivers": drivers}
    return body


def condition(plane: ControlPlane, ns: str, name: str, kind: str) -> Obj:
    status = set_status(plane, ns, name)
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def warnings_of(plane: ControlPlane, ns: str, name: str) -> list[tuple[str, str]]:
    events = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
    return [
        (e["reason"], e["note"])
        for e in events
        if e["regarding"]["name"] == name and e["type"] == "Warning"
    ]


def plan_text(plane: ControlPlane, ns: str, name: str) -> str:
    result = subprocess.run(
        [*CLI, "plan", f"--kubeconfig={plane.kubeconfig}", "-n", ns, name],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def step_of(line: str) -> tuple[str, list[str]]:
    """(verb, instance names) of a logged step: `create 2 (p-*)`, `create pod 2 (a, b)`,
    `protect a`; a create's names are its generateName, once per instance."""
    text = line.split(": ", 1)[0]
    for verb in ("create pod", "protect", "create"):
        if text.startswith(verb + " "):
            rest = text[len(verb) + 1 :]
            if counted := re.fullmatch(r"(\d+) \((.*)\)", rest):
                names = counted.group(2).split(", ")
                return verb, names * int(counted.group(1)) if len(names) == 1 else names
            return verb, [rest]
    return "", []


def log_of(process: ReconcilerProcess) -> str:
    return Path(process.log.name).read_text(errors="replace")


def standbys(plane: ControlPlane, ns: str) -> list[str]:
    found = get_json(plane, "exporters", "-n", ns, "-l", f"{STANDBY_LABEL}=true")["items"]
    return sorted(e["metadata"]["name"] for e in found)


def test_a_refused_write_reaches_the_status_the_events_and_the_plan(
    control_plane: ControlPlane, lab: str, reconciler: ReconcilerProcess
) -> None:
    plane, ns = control_plane, lab
    # As found by a user: 63 drivers of 16,800 characters each (a config Secret over 1 MiB),
    # and a set whose deeply nested config renders beyond the 3 MiB request limit.
    create(
        plane,
        pool(
            "big2",
            ns,
            [{"name": f"d{i}", "type": MOCK, "config": {"v": "x" * 16_800}} for i in range(63)],
            minReplicas=1,
            maxReplicas=1,
        ),
    )
    create(plane, pool("deep", ns, deep_drivers(40), minReplicas=1, maxReplicas=1))

    def degraded(name: str) -> Obj:
        found = condition(plane, ns, name, "Degraded")
        return found if found.get("reason") == "WriteRejected" else {}

    big = wait_for("big2 Degraded WriteRejected", lambda: degraded("big2"), timeout=90)
    [exporter] = get_json(plane, "exporters", "-n", ns, "-l", instance_selector("big2"))["items"]
    instance = exporter["metadata"]["name"]
    big_revision = exporter["metadata"]["annotations"][REVISION]
    assert big["status"] == "True"
    assert big["message"] == (
        f'create pod {instance}: 422 Invalid: Secret "exporter-config-{instance}" is invalid: '
        "data: Too long: may not be more than 1048576 bytes"
    )
    deep_found = wait_for("deep Degraded WriteRejected", lambda: degraded("deep"), timeout=90)
    assert "413 RequestEntityTooLarge" in deep_found["message"]
    # The credentials came: nothing says the pool still waits for them.
    for name in ("big2", "deep"):
        assert condition(plane, ns, name, "Progressing")["reason"] != "WaitingForCredentials"
    # Retried under the backoff, and still one Warning per set: the failure's transition.
    wait_for(
        "three retries of each",
        lambda: all(
            len(re.findall(rf"{ns}/{name}: create pod \S+ failed", log_of(reconciler))) >= 3
            for name in ("big2", "deep")
        ),
        timeout=60,
    )
    assert warnings_of(plane, ns, "big2") == [
        ("ExporterSetDegraded", f"Degraded True (WriteRejected): {big['message']}")
    ]
    assert len(warnings_of(plane, ns, "deep")) == 1
    assert f"failed: WriteRejected: {big['message']}\n" in plan_text(plane, ns, "big2")

    # Fixed: the Secret and the Pod are written, and the pool recovers.
    small = pool("big2", ns, [{"name": "power", "type": MOCK}])["spec"]["template"]
    plane.kubectl(
        "patch", "exporterset", "big2", "-n", ns, "--type=merge",
        "-p", json.dumps({"spec": {"template": small}}),
    )  # fmt: skip
    wait_for(
        "big2 recovered",
        lambda: condition(plane, ns, "big2", "Degraded").get("reason") == "AllReplicasHealthy",
        timeout=60,
    )

    # The instance that never got its Pod is of the earlier revision: the rollout replaces it
    # (fenced, deleted once the fence settled, then the new one: maxReplicas 1) with one of
    # the fixed template, whose Pod is written.
    def replaced() -> Obj | None:
        found = get_json(plane, "exporters", "-n", ns, "-l", instance_selector("big2"))["items"]
        revisions = [e["metadata"]["annotations"][REVISION] for e in found]
        return found[0] if revisions and big_revision not in revisions else None

    current = wait_for("the instance of the earlier revision replaced", replaced, timeout=60)
    [only] = get_json(plane, "exporters", "-n", ns, "-l", instance_selector("big2"))["items"]
    assert only["metadata"]["uid"] == current["metadata"]["uid"]
    assert current["metadata"]["name"] != instance
    name = current["metadata"]["name"]
    pod = wait_for(
        "its Pod (written after its Exporter)", lambda: find_json(plane, "pod", name, "-n", ns)
    )
    assert pod["metadata"]["name"] == name
    assert "WriteRejected" not in plan_text(plane, ns, "big2")


def test_one_pending_lease_two_sets_match_makes_one_instance(
    control_plane: ControlPlane, lab: str, jumpstarter: Jumpstarter, reconciler: ReconcilerProcess
) -> None:
    plane, ns = control_plane, lab
    census = Census(plane, ns)
    shared = {"jumpstarter.dev/pool": "poolA"}
    for name in ("older", "newer"):
        body = exporter_set(
            name, ns, class_name="qemu", labels={**shared, "set": name},
            with_template=True, minAvailableReplicas=0,
        )  # fmt: skip
        body["spec"]["selector"] = {"matchLabels": shared}
        apply(plane, body)
        time.sleep(1.1)  # creationTimestamp has a one-second grain
    # Jumpstarter's controller ends a Lease that no Exporter matches: it pends on the standbys.
    wait_for("both standbys", lambda: len(standbys(plane, ns)) == 2)
    jumpstarter.request_lease("jumpstarter.dev/pool=poolA", "lease-a")
    wait_for("one instance for the Lease", lambda: sum(census.now.values()) >= 1)
    time.sleep(3)  # both pools have had their passes
    assert dict(census.most) == {"older": 1}, dict(census.most)


def test_each_step_is_logged_once_by_the_pass_that_carried_it_out(
    control_plane: ControlPlane,
    lab: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    reconciler: ReconcilerProcess,
) -> None:
    plane, ns = control_plane, lab
    census = Census(plane, ns)
    apply(
        plane,
        pool("p7", ns, [{"name": "power", "type": MOCK}], minAvailableReplicas=3, maxReplicas=8),
    )
    wait_for("3 Pods", lambda: len(get_json(plane, "pods", "-n", ns)["items"]) == 3)
    # Two leases, each pinned to an instance, take them once their exporters registered;
    # their refill and their protection follow.
    instances = sorted(census.names("p7"))
    for n, exporter in enumerate(instances[:2]):
        jumpstarter.request_lease("board=p7", f"lease-{n}", exporter=exporter)
    for n, exporter in enumerate(instances[:2]):
        held = partial(assigned_exporter, plane, ns, f"lease-{n}")
        assert wait_for(f"lease-{n} assigned", held, timeout=90) == exporter
    wait_for("5 Pods", lambda: len(get_json(plane, "pods", "-n", ns)["items"]) == 5, timeout=60)
    wait_for(
        "both leased instances protected",
        lambda: all(
            LEASE_PROTECTION
            in (get_json(plane, "exporter", e, "-n", ns)["metadata"].get("finalizers") or [])
            for e in instances[:2]
        ),
    )
    time.sleep(2)  # the passes after the last write
    lines = [
        line.split(f"{ns}/p7: ", 1)[1]
        for line in log_of(reconciler).splitlines()
        if f"{ns}/p7: " in line
    ]
    creates = [names for verb, names in map(step_of, lines) if verb == "create"]
    assert sum(len(n) for n in creates) == len(census.names("p7")) == 5, lines
    pods = [names for verb, names in map(step_of, lines) if verb == "create pod"]
    assert sorted(n for names in pods for n in names) == sorted(census.names("p7")), lines
    protects = [names for verb, names in map(step_of, lines) if verb == "protect"]
    assert sorted(n for names in protects for n in names) == instances[:2], lines
    print(
        f"\nlog lines per write: {len(creates)} create lines for 5 Exporters, {len(pods)} "
        f"create pod lines for 5 Pods, {len(protects)} protect lines for 2 patches"
    )
