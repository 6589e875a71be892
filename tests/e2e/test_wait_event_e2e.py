"""An Event marks the start of a pool's wait for credentials, once: the passes that follow
the first (its own creates bring the set back to the queue before the status it wrote
reaches the cache) write none. The first install on a real node showed two
`WaitingForCredentials` Events 18 ms apart for one start of a wait; the node tier checks
the same across a leader handover."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.stack import running_reconciler
from pool.model.reasons import WAITING_FOR_CREDENTIALS
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class, wait_for


def _waiting(plane: ControlPlane, ns: str) -> list[dict[str, Any]]:
    events = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
    return [e for e in events if e["reason"] == WAITING_FOR_CREDENTIALS]


def _reason(plane: ControlPlane, ns: str) -> str:
    status = get_json(plane, "exporterset", "pool", "-n", ns).get("status", {})
    progressing = [c for c in status.get("conditions", []) if c["type"] == "Progressing"]
    return str(progressing[0]["reason"]) if progressing else ""


def test_one_event_for_one_start_of_a_wait_for_credentials(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    plane, ns = control_plane, namespace
    apply(plane, virtual_target_class("qemu", ns))
    with running_reconciler(
        plane, tmp_path, extra=["--namespace", ns, "--no-leader-election"]
    ) as reconciler:
        apply(
            plane,
            exporter_set("pool", ns, class_name="qemu", with_template=True, minAvailableReplicas=3),
        )
        wait_for("the wait", lambda: _reason(plane, ns) == WAITING_FOR_CREDENTIALS)
        wait_for("its Event", lambda: _waiting(plane, ns))
        time.sleep(3)  # the passes the creates and the status write bring
        reconciler.check_alive()
        events = _waiting(plane, ns)
    print(f"{WAITING_FOR_CREDENTIALS} Events for one start of a wait: {len(events)}")
    assert [e["note"] for e in events] == [events[0]["note"]]
