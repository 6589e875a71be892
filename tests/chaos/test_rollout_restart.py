"""The reconciler killed (SIGKILL) in the middle of a rollout, and another started: the new
one finishes it with no duplicate replacement and nothing removed twice. Asserted from
the apiserver's audit log: every outdated instance deleted once, one Exporter created
for each.

Jumpstarter's released 0.9.0 controller serves the namespace and each instance's exporter
is the release's `jmp run` (`tests.exporters`), which registers with it; the kubelet is
played (Pods set Running)."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import running_reconciler
from pool.model.keys import REVISION
from tests.census import Census
from tests.chaos.support import until
from tests.e2e.objects import apply, exporter_set, virtual_target_class
from tests.e2e.test_replacement_e2e import instances
from tests.e2e.test_rollout_e2e import Kubelet, available, edit_template
from tests.exporters import ExporterProcesses

SIZE, CEILING = 4, 5


def writes(plane: ControlPlane, ns: str, verb: str, since: int) -> Counter[str]:
    """Exporters of the namespace the apiserver accepted `verb` for, by name."""
    found: Counter[str] = Counter()
    for event in plane.audit_events()[since:]:
        ref, code = event["objectRef"], (event.get("responseStatus") or {}).get("code", 0)
        if (
            event["verb"] == verb
            and ref.get("resource") == "exporters"
            and ref.get("namespace") == ns
            and 200 <= code < 300
        ):
            found[ref.get("name") or "(generated)"] += 1
    return found


def test_killed_mid_rollout_the_next_reconciler_finishes_it_once(
    plane: ControlPlane,
    namespace: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    tmp_path: Path,
    recovery: Callable[[str, float], None],
) -> None:
    ns, stop = namespace, threading.Event()
    apply(plane, virtual_target_class("qemu", ns))
    spec = {"minReplicas": SIZE, "maxReplicas": CEILING, "minAvailableReplicas": 2}
    apply(plane, exporter_set("pool", ns, class_name="qemu", with_template=True, **spec))
    census, kubelet = Census(plane, ns), Kubelet(plane, ns)
    playing = threading.Thread(target=kubelet.run, args=(stop,), daemon=True)
    playing.start()
    extra = ["--namespace", ns, "--no-leader-election"]
    try:
        with running_reconciler(plane, tmp_path, name="first", extra=extra) as first:
            until("a full pool", lambda: sum(map(available, instances(plane, ns))) == SIZE, 60)
            before = {e["metadata"]["name"] for e in instances(plane, ns)}
            since = len(plane.audit_events())
            edit_template(plane, ns, "2")
            until("one outdated instance removed", lambda: before - set(census.names("pool")), 60)
            first.signal(signal.SIGKILL)
            killed = time.monotonic()
        with running_reconciler(plane, tmp_path, name="second", extra=extra) as second:

            def done() -> bool:
                live = instances(plane, ns)
                fresh = [e for e in live if e["metadata"]["name"] not in before]
                return len(live) == SIZE and len(fresh) == SIZE and all(map(available, live))

            until("every instance replaced", done, 120)
            recovery("rollout finished after a kill", time.monotonic() - killed)
            time.sleep(2)  # a few more passes
            second.check_alive()
        revisions = {e["metadata"]["annotations"][REVISION] for e in instances(plane, ns)}
        deleted = writes(plane, ns, "delete", since)
        created = sum(writes(plane, ns, "create", since).values())
        print(
            f"\nkilled mid-rollout: {created} Exporters created, deletes {dict(deleted)}, "
            f"most owned {census.most['pool']} (ceiling {CEILING})"
        )
        assert len(revisions) == 1
        assert set(deleted) == before and set(deleted.values()) == {1}, deleted
        assert created == SIZE, created
        assert census.most["pool"] <= CEILING
    finally:
        stop.set()
        census.stop()
        playing.join(timeout=60)  # its last kubectl ends before the plane stops
