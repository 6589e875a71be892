"""A leader paused past its Lease (SIGSTOP), while the pool has work: the standby takes
over, and when the paused one resumes it writes nothing before it has found out that it
lost the Lease. Asserted from the apiserver's view: its audit log, where each reconciler
writes under an identity of its own, holds no write of the stale leader after the
takeover. Two leaders writing at once is the failure that matters. Jumpstarter's released
0.9.0 controller serves the namespace and issues the instances' credentials."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import running_reconciler
from tests.chaos.support import identity, names, until
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class

# Short, in the ratio of the defaults (15 / 10 / 2): takeover after 4 s of silence.
ELECTION = ["--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5"]


def _when(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def writes_by(plane: ControlPlane, user: str) -> list[dict[str, Any]]:
    return [e for e in plane.audit_events() if e["user"]["username"] == user]


def _refused_renewal(event: dict[str, Any]) -> bool:
    """An update of the leader Lease that the apiserver refused as a conflict."""
    ref, status = event["objectRef"], event.get("responseStatus") or {}
    return (
        event["verb"] == "update"
        and ref["resource"] == "leases"
        and ref.get("apiGroup") == "coordination.k8s.io"
        and status.get("code") == 409
    )


def test_a_resumed_stale_leader_writes_nothing_after_the_takeover(
    plane: ControlPlane,
    namespace: str,
    jumpstarter: Jumpstarter,
    tmp_path: Path,
    recovery: Callable[[str, float], None],
) -> None:
    ns = namespace
    users = {n: f"system:serviceaccount:{ns}:{n}" for n in ("reconciler-a", "reconciler-b")}
    configs = {n: identity(plane, ns, n, tmp_path) for n in users}
    apply(plane, virtual_target_class("qemu", ns))
    apply(plane, exporter_set("pool", ns, class_name="qemu", with_template=True, minReplicas=1))
    extra = ["--namespace", ns, "--leader-election-namespace", ns, *ELECTION]
    with running_reconciler(
        plane, tmp_path, name="a", kubeconfig=configs["reconciler-a"], extra=extra
    ) as first:
        until("a leads", lambda: "reconciling (" in first.log_tail(50), 60)
        until("one instance", lambda: len(names(plane, "exporters", ns)) == 1, 60)
        with running_reconciler(
            plane, tmp_path, name="b", kubeconfig=configs["reconciler-b"], extra=extra
        ) as second:
            until("b stands by", lambda: "waiting for leadership" in second.log_tail(50), 60)

            first.signal(signal.SIGSTOP)
            paused = time.monotonic()
            # Work for whoever leads: more instances wanted. The paused leader's watch
            # brings it this change when it resumes, so it will want to write too.
            patch = json.dumps({"spec": {"minReplicas": 3}})
            plane.kubectl("patch", "exporterset", "pool", "-n", ns, "--type=merge", "-p", patch)
            until("b leads", lambda: "reconciling (" in second.log_tail(50), 60)
            recovery("standby leads after the leader paused", time.monotonic() - paused)
            until("b scales to 3", lambda: len(names(plane, "exporters", ns)) == 3, 60)
            expected = names(plane, "exporters", ns)
            time.sleep(max(0.0, 8 - (time.monotonic() - paused)))  # paused well past its Lease

            takeover = min(
                _when(e)
                for e in writes_by(plane, users["reconciler-b"])
                if e["objectRef"]["resource"] == "leases"
                and e["objectRef"].get("apiGroup") == "coordination.k8s.io"
            )
            first.signal(signal.SIGCONT)
            resumed = time.monotonic()
            assert first.popen.wait(timeout=60) == 1  # it found out, and exits to restart
            recovery("resumed stale leader exits", time.monotonic() - resumed)

            attempts = [e for e in writes_by(plane, users["reconciler-a"]) if _when(e) >= takeover]
            # Its elector may try to renew with the Lease version it held: the apiserver's
            # optimistic concurrency refuses that (409) and it learns it lost. Nothing else.
            stale = [e for e in attempts if not _refused_renewal(e)]
            assert stale == [], [(e["verb"], e["objectRef"], e["stageTimestamp"]) for e in stale]
            # Whether it tries a write before its elector finds the Lease lost depends on
            # which event it handles first; either way nothing may reach the apiserver
            # (the write fence itself: `tests/unit/test_reconciler_metrics.py`).
            log = first.log_tail(400)
            assert "leader election: lost the Lease" in log, log[-3000:]
            refused = log.count("not the leader any more")
            print(f"\nthe resumed stale leader held back {refused} write(s)")

            assert names(plane, "exporters", ns) == expected
            lease = get_json(
                plane, "leases.coordination.k8s.io", "exporterset-reconciler", "-n", ns
            )
            assert lease["spec"]["holderIdentity"] != ""
            second.check_alive()
