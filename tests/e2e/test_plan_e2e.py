"""`virtualtarget plan` against a real kube-apiserver: what it says before the
reconciler runs is what the reconciler then does, and the reconciler's log and Events
give the same reasons.

Jumpstarter's released 0.9.0 controller serves the namespace and issues the instances'
credentials; no exporter runs, so they stay provisioning. Waits are bounded polls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.stack import running_reconciler
from pool.model.keys import instance_selector
from pool.model.reasons import POD_CREATED, SCALE_UP, SET_DEGRADED, SET_PROGRESSING
from pool.rules.planreport import STANDBY_WHY
from pool.rules.stages import standby
from pool.rules.transitions import REASONS as TRANSITIONS
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class, wait_for

WHY = "warm buffer 2, available 0"


def plan(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = f"--kubeconfig={plane.kubeconfig}"
    return subprocess.run(
        [sys.executable, "-m", "virtualtarget.cli", "plan", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def planned(plane: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    result = plan(plane, "-n", ns, "-o", "json", name)
    assert result.returncode == 0, result.stderr
    (entry,) = json.loads(result.stdout)["sets"]
    assert isinstance(entry, dict)
    return entry


def names(plane: ControlPlane, kind: str, ns: str, *select: str) -> list[str]:
    found = get_json(plane, kind, "-n", ns, *select)["items"]
    return sorted(o["metadata"]["name"] for o in found)


def test_plan_before_the_reconciler_is_what_the_reconciler_does(
    control_plane: ControlPlane, ns: str, tmp_path: Path
) -> None:
    plane = control_plane

    def pool(name: str, class_name: str, **spec: Any) -> dict[str, Any]:
        labels = {"board": name}
        return exporter_set(
            name, ns, class_name=class_name, labels=labels, with_template=True, **spec
        )

    apply(plane, virtual_target_class("qemu", ns))
    apply(
        plane,
        pool("pool", "qemu", minAvailableReplicas=2, maxReplicas=4),
        pool("broken", "qemu-x86", minReplicas=1),
    )

    text = plan(plane, "-n", ns)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    assert text.stdout.splitlines() == [
        f"{ns}/broken  class qemu-x86  desired 1  pending leases 0",
        "  buckets   terminating 0, failed 0, draining 0, busy 0, released 0, available 0, "
        "provisioning 0, standby 0",
        f"  steps     create standby broken-*: {standby.NEEDED}",
        "            update status",
        "            record event: ExporterSetDegraded, Degraded True"
        " (VirtualTargetClassNotFound):"
        f' VirtualTargetClass "qemu-x86" not found in namespace "{ns}"',
        "            record event: ScalingLimited, ScalingLimited True"
        " (VirtualTargetClassNotFound):"
        f' scaling stopped: VirtualTargetClass "qemu-x86" not found in namespace "{ns}"',
        f'            waiting: VirtualTargetClass "qemu-x86" not found in namespace "{ns}"',
        "  awaiting  none",
        f"  standby   being created: {STANDBY_WHY}",
        "",
        f"{ns}/pool  class qemu  desired 2  pending leases 0",
        "  buckets   terminating 0, failed 0, draining 0, busy 0, released 0, available 0, "
        "provisioning 0, standby 0",
        f"  steps     create 2 (pool-*): {WHY}",
        "            update status",
        "            record event: ExporterSetProgressing, Progressing True (ScalingUp):"
        " creating 2 instance(s) towards 2",
        "  awaiting  none",
    ]
    before = planned(plane, ns, "pool")
    creates = [step for step in before["steps"] if step["verb"] == "create"]
    assert [(s["names"], s["reason"], s["at"]) for s in creates] == [
        (["pool-*", "pool-*"], WHY, None)
    ]
    assert before["desired"] == 2 and set(before["buckets"].values()) == {0}
    promised = len(creates[0]["names"])  # names are generated: the plan promises a count

    with running_reconciler(
        plane, tmp_path, extra=["--namespace", ns, "--no-leader-election"]
    ) as reconciler:
        wait_for("the promised Pods", lambda: len(names(plane, "pods", ns)) == promised)
        instances = ("-l", instance_selector("pool"))
        created = names(plane, "exporters", ns, *instances)
        assert all(name.startswith("pool-") for name in created)
        assert names(plane, "pods", ns) == created
        # Settled: plan sees nothing left to do, the status the reconciler wrote included.
        after = wait_for(
            "a settled plan",
            lambda: (e := planned(plane, ns, "pool"))["steps"] == e["awaiting"] == [] and e,
        )
        assert names(plane, "exporters", ns, *instances) == created  # no more
        assert after["buckets"]["provisioning"] == 2 and after["desired"] == 2
        log = Path(reconciler.log.name).read_text()
        assert f"{ns}/pool: create 2 (pool-*): {WHY}" in log
        assert f'{ns}/broken: waiting: VirtualTargetClass "qemu-x86" not found' in log
        events = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
        of_pool = [e for e in events if e["regarding"]["name"] == "pool"]
        notes = sorted(e["note"] for e in of_pool if e["reason"] == SCALE_UP)
        assert notes == [f"created Exporter {name}: {WHY}" for name in created]
        pods = sorted(e["note"] for e in events if e["reason"] == POD_CREATED)
        assert pods == [f"created Pod {name}" for name in created]
        # The condition transitions, as Jumpstarter's controller writes them, once each.
        of_sets = [(e["regarding"]["name"], e["reason"], e["type"]) for e in events]
        assert ("broken", SET_DEGRADED, "Warning") in of_sets
        assert ("pool", SET_PROGRESSING, "Normal") in of_sets
        transitions = [t for t in of_sets if t[1] in TRANSITIONS]
        assert len(transitions) == len(set(transitions)), transitions
        reconciler.check_alive()


def test_unknown_set_or_namespace_is_one_line(control_plane: ControlPlane, namespace: str) -> None:
    missing_set = plan(control_plane, "-n", namespace, "nope")
    assert missing_set.returncode == 1 and missing_set.stdout == ""
    assert missing_set.stderr == f'plan: ExporterSet "nope" not found in namespace "{namespace}"\n'
    missing_namespace = plan(control_plane, "-n", f"{namespace}-absent")
    assert missing_namespace.returncode == 2
    assert missing_namespace.stderr == f'plan: namespace "{namespace}-absent" not found\n'
    empty = plan(control_plane, "-n", namespace)
    assert (empty.returncode, empty.stdout) == (0, f'no ExporterSets in namespace "{namespace}"\n')
