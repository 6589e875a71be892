"""A Lease never dies for want of an instance, against Jumpstarter's own 0.9.0 controller.

That controller ends a new Lease at once when no Exporter matches it (Unsatisfiable,
NoAccess) or all that match are disabled (AllDisabled). Here a pool with no enabled
instance keeps its standby Exporter (`pool.rules.stages.standby`): a Lease the release's
`jmp create lease` asks for pends on it (Offline), the standby becomes the instance, its
exporter (the release's `jmp run`, `tests.exporters`) registers, and the controller assigns
the Lease. For a WaitForFirstConsumer pool, an Immediate pool at zero, and a pool whose only
instance is fenced for a rollout at its ceiling. Figures are printed, not asserted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import running_reconciler
from pool.model.keys import SET_LABEL, STANDBY_LABEL
from pool.model.timefmt import parse_time
from tests.census import Census
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    patch_spec,
    set_status,
    virtual_target_class,
)
from tests.e2e.objects import wait_for as wait
from tests.exporters import ExporterProcesses

SELECTOR = "board=lab"


def make_pool(plane: ControlPlane, ns: str, binding: str, **spec: Any) -> None:
    klass = virtual_target_class("qemu", ns, bindingMode=binding, reclaimPolicy="Delete")
    body = exporter_set(
        "pool", ns, class_name="qemu", labels={"board": "lab"}, with_template=True,
        scaleDownCooldown="1s", **spec,
    )  # fmt: skip
    apply(plane, klass, body)


def pool_exporters(plane: ControlPlane, ns: str) -> list[dict[str, Any]]:
    items = get_json(plane, "exporters", "-n", ns, "-l", f"{SET_LABEL}=pool")["items"]
    return [e for e in items if not e["metadata"].get("deletionTimestamp")]


def fence_time(exporter: dict[str, Any]) -> datetime:
    """When `spec.enabled` was last written (its field manager's time, whole seconds)."""
    times = [
        parse_time(entry["time"])
        for entry in exporter["metadata"].get("managedFields") or []
        if '"f:enabled"' in json.dumps(entry.get("fieldsV1") or {})
    ]
    assert times, exporter["metadata"].get("managedFields")
    return max(times)


def standbys(plane: ControlPlane, ns: str) -> list[str]:
    return [
        e["metadata"]["name"]
        for e in pool_exporters(plane, ns)
        if e["metadata"].get("labels", {}).get(STANDBY_LABEL) == "true"
    ]


class LeaseWatch:
    """Every status the Lease showed, read every 0.2 s: an ending is never missed (an ended
    Lease stays ended), and its own timestamps give the figures."""

    def __init__(self, plane: ControlPlane, ns: str, name: str) -> None:
        self.plane, self.ns, self.name = plane, ns, name
        self.seen: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            found = self.plane.kubectl(
                "get", "leases.jumpstarter.dev", self.name, "-n", self.ns, "-o", "json",
                check=False,
            )  # fmt: skip
            if found.returncode == 0:
                self.seen.append(json.loads(found.stdout))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def reasons(self) -> set[tuple[str, str, str]]:
        return {
            (c["type"], c["status"], c.get("reason", ""))
            for lease in self.seen
            for c in (lease.get("status") or {}).get("conditions") or []
        }

    def last(self) -> dict[str, Any]:
        return self.seen[-1] if self.seen else {}

    def ready_after(self) -> float:
        """Seconds from the Lease's creation to its Ready condition (its own timestamps,
        one second's resolution)."""
        lease = self.last()
        ready = next(
            c
            for c in lease["status"]["conditions"]
            if c["type"] == "Ready" and c["status"] == "True"
        )
        created = lease["metadata"]["creationTimestamp"]
        return (_time(ready["lastTransitionTime"]) - _time(created)).total_seconds()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def reconciler(control_plane: ControlPlane, ns: str, tmp_path: Path) -> Iterator[None]:
    with running_reconciler(
        control_plane, tmp_path, extra=["--namespace", ns, "--no-leader-election"]
    ) as process:
        yield
        process.check_alive()


def serve_one_lease(
    plane: ControlPlane,
    ns: str,
    jumpstarter: Jumpstarter,
    name: str,
    once_pending: Callable[[], None] | None = None,
) -> str:
    """Ask for a Lease of the pool's labels; it pends and is assigned, never ended: the
    Exporter it got. `once_pending` runs when the Lease is first seen pending Offline."""
    watch = LeaseWatch(plane, ns, name)
    pending = False
    try:
        asked = time.monotonic()
        jumpstarter.request_lease(SELECTOR, name)

        def assigned() -> str | None:
            nonlocal pending
            status = watch.last().get("status") or {}
            assert not status.get("ended"), f"the Lease ended: {status}"
            if once_pending and not pending and ("Pending", "True", "Offline") in watch.reasons():
                pending = True
                once_pending()
            return (status.get("exporterRef") or {}).get("name")

        exporter = str(wait(f"{name} assigned", assigned, timeout=120))
        took = time.monotonic() - asked
    finally:
        watch.stop()
    reasons = watch.reasons()
    assert not {r for r in reasons if r[0] == "Unsatisfiable" and r[1] == "True"}, reasons
    assert ("Pending", "True", "Offline") in reasons  # it waited on the standby, then got it
    print(
        f"\n{name}: requested -> assigned {took:.1f} s here; Lease created -> Ready "
        f"{watch.ready_after():.0f} s by its own timestamps; conditions seen {sorted(reasons)}"
    )
    return exporter


def test_a_first_consumer_pool_serves_a_lease_from_nothing_and_goes_back_to_its_standby(
    control_plane: ControlPlane,
    ns: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    reconciler: None,
) -> None:
    plane = control_plane
    make_pool(plane, ns, "WaitForFirstConsumer", minAvailableReplicas=0, maxReplicas=2)
    (standby,) = wait("the standby", lambda: standbys(plane, ns) or None)
    assert not get_json(plane, "pods", "-n", ns)["items"]  # a standby has no Pod

    def said(status: dict[str, Any]) -> bool:
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        message = conditions.get("Available", {}).get("message", "")
        return f"standby Exporter {standby} keeps Leases pending" in message

    # The status says so once a pass has seen the standby: the pass that created it wrote
    # the status it had planned before, or none yet, since the watch can show the standby
    # before the first status write lands.
    status = wait(
        "the status naming the standby",
        lambda: said(s := set_status(plane, ns)) and s,
    )
    assert status["replicas"] == 0

    served = serve_one_lease(plane, ns, jumpstarter, "first")
    assert served == standby  # the standby became the instance: no second Exporter
    assert len(exporters.started) == 1
    jumpstarter.release_lease("first")
    # ExitAndReplace: the served instance goes; the pool is back to one standby, no Pod.
    wait(
        "back to a standby alone",
        lambda: [e["metadata"]["name"] for e in pool_exporters(plane, ns)] == standbys(plane, ns)
        and len(standbys(plane, ns)) == 1
        and not get_json(plane, "pods", "-n", ns)["items"],
        timeout=90,
    )


def test_an_immediate_pool_at_zero_serves_a_lease(
    control_plane: ControlPlane,
    ns: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    reconciler: None,
) -> None:
    plane = control_plane
    make_pool(plane, ns, "Immediate", minReplicas=0, minAvailableReplicas=0)
    (standby,) = wait("the standby", lambda: standbys(plane, ns) or None)
    assert serve_one_lease(plane, ns, jumpstarter, "cold") == standby


def test_a_lease_arriving_while_the_only_instance_is_fenced_for_a_rollout_is_served(
    control_plane: ControlPlane,
    ns: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    reconciler: None,
) -> None:
    plane = control_plane
    make_pool(plane, ns, "Immediate", minReplicas=1, maxReplicas=1, minAvailableReplicas=1)

    def online() -> str | None:
        for e in pool_exporters(plane, ns):
            conditions = {c["type"]: c["status"] for c in e.get("status", {}).get("conditions", [])}
            if conditions.get("Online") == "True" and not standbys(plane, ns):
                return str(e["metadata"]["name"])
        return None

    old = str(wait("the instance Online", online, timeout=90))
    # The replacement's exporter starts only once the Lease pends (a slow kubelet): else,
    # on a fast machine, the rollout could finish before the Lease arrives.
    exporters.pause()
    # A template change: a new revision. At the ceiling, the old instance goes first.
    patch_spec(plane, "exporterset", "pool", ns, template={
        "metadata": {"labels": {"board": "lab"}, "annotations": {"rev": "2"}}
    })  # fmt: skip

    def fenced() -> dict[str, Any] | None:
        found: dict[str, Any] = get_json(plane, "exporter", old, "-n", ns, "--show-managed-fields")
        return found if found.get("spec", {}).get("enabled") is False else None

    fenced_at = fence_time(wait("the old instance fenced", fenced, timeout=60))
    # The standby was made before the fence (by the time the fence is seen here it may
    # be promoted already: the same Exporter, its label gone).
    made = {
        e["metadata"]["name"]: parse_time(e["metadata"]["creationTimestamp"])
        for e in get_json(plane, "exporters", "-n", ns)["items"]
        if e["metadata"]["name"] != old
    }
    assert any(at <= fenced_at for at in made.values()), (made, fenced_at)
    served = serve_one_lease(
        plane, ns, jumpstarter, "during-rollout", once_pending=exporters.resume
    )
    assert served != old
    live = {e["metadata"]["name"] for e in pool_exporters(plane, ns)}
    assert len(live) <= 1 + len(standbys(plane, ns))  # never over the ceiling in instances


def test_a_lease_that_ends_before_its_instance_boots_gets_no_other(
    control_plane: ControlPlane,
    ns: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    reconciler: None,
) -> None:
    """The client gives up while its Lease pends: the Lease ends, and the pool makes no
    instance for it; the one it made the standby into is a surplus, goes, and a standby
    takes its place. Two Exporters in all: the first standby, and the next one."""
    plane = control_plane
    census = Census(plane, ns)
    try:
        make_pool(plane, ns, "WaitForFirstConsumer", minAvailableReplicas=0, maxReplicas=2)
        (standby,) = wait("the standby", lambda: standbys(plane, ns) or None)
        exporters.held.add(standby)  # its exporter never starts: the Lease keeps pending
        jumpstarter.request_lease(SELECTOR, "given-up")
        wait("the standby made the instance", lambda: not standbys(plane, ns), timeout=60)
        jumpstarter.release_lease("given-up")
        lease = get_json(plane, "leases.jumpstarter.dev", "given-up", "-n", ns)
        # (a Lease released while it pends may have no status yet: its controller writes one)
        assert (lease.get("status") or {}).get("ended") or lease["spec"].get("release")
        wait(
            "a standby alone again",
            lambda: len(standbys(plane, ns)) == 1 and len(pool_exporters(plane, ns)) == 1,
            timeout=90,
        )
        time.sleep(3)  # more passes: nothing new for the ended Lease
        assert census.names("pool") == []  # no instance: the standby alone
        assert len(census.ever) == 2, sorted(census.ever)
    finally:
        census.stop()
