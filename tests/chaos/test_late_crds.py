"""Jumpstarter's Lease CRD installed after the reconciler started: its cache finds the
resource by its own retry, with no restart, and a pending Lease gets its instance.

The CRDs installed late are Jumpstarter's release's own `jumpstarter.dev` CRDs (its
Lease among them, its Exporter in place of the generated one), as its operator installs
them. Then Jumpstarter's released 0.9.0 controller starts for the namespace (it exits
without its Lease CRD: it could not run before), and the Lease is the one the release's
client library asks for (`jmp create lease -l board=late`). It pends (Offline) on the
pool's standby Exporter, which the reconciler then promotes to the instance.

Measured from the CRDs' install to the instance, the interval includes the install (until
Established), the start of Jumpstarter's controller until it accepts its tokens (seconds:
it is recorded apart), the Lease asked of it and the reconciler's pass that promotes the
standby. The reconciler's own part is recorded twice, not bounded: its first list of the
Leases that is answered (the audit log's time) after the install's start, and the
instance after the Lease was asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import install_crds, running_jumpstarter
from harness.stack import running_reconciler
from pool.model.keys import instance_selector
from pool.model.timefmt import parse_time
from tests.chaos.support import identity, names, until
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class


@pytest.fixture(scope="module")
def bare_plane() -> Iterator[ControlPlane]:
    """A control plane of its own, without Jumpstarter's CRDs (the generated Exporter CRD
    only, no Lease CRD), with an audit log of every request."""
    with running_control_plane(audit_reads=True) as plane:
        yield plane


def first_lease_list(plane: ControlPlane, user: str) -> datetime | None:
    """When `user` first listed Jumpstarter's Leases and got them (200, not the 404 of a
    resource that is not served), by the audit log; None if it has not."""
    for event in plane.iter_audit_events():
        ref = event.get("objectRef") or {}
        if (
            event["user"]["username"] == user
            and event["verb"] == "list"
            and (ref.get("apiGroup"), ref.get("resource")) == ("jumpstarter.dev", "leases")
            and (event.get("responseStatus") or {}).get("code") == 200
        ):
            return parse_time(event["requestReceivedTimestamp"])
    return None


def lease_state(plane: ControlPlane, ns: str, name: str) -> tuple[list[tuple[str, str]], bool]:
    """The Lease's true conditions (type, reason) and whether it ended, as Jumpstarter's
    controller wrote them."""
    status = get_json(plane, "leases.jumpstarter.dev", name, "-n", ns).get("status") or {}
    true = [
        (c["type"], c.get("reason", ""))
        for c in status.get("conditions") or []
        if c.get("status") == "True"
    ]
    return sorted(true), status.get("ended") is True


def test_a_lease_crd_installed_late_is_found_and_used_without_a_restart(
    bare_plane: ControlPlane, tmp_path: Path, recovery: Callable[[str, float], None]
) -> None:
    plane, ns = bare_plane, "late"
    plane.kubectl("create", "namespace", ns)
    user = f"system:serviceaccount:{ns}:reconciler"
    kubeconfig = identity(plane, ns, "reconciler", tmp_path)
    apply(plane, virtual_target_class("lazy", ns, bindingMode="WaitForFirstConsumer"))
    labels = {"board": "late"}
    apply(plane, exporter_set("pool", ns, class_name="lazy", labels=labels, with_template=True))
    extra = ["--namespace", ns, "--no-leader-election"]
    with running_reconciler(plane, tmp_path, kubeconfig=kubeconfig, extra=extra) as reconciler:
        until("the reconciler runs", lambda: "reconciling (" in reconciler.log_tail(50), 60)
        time.sleep(6)  # long enough for the cache's retry to back off to its longest wait
        # No instance without a Lease (the pool's standby, with no Pod, is none).
        instances = ("-l", instance_selector("pool"))
        assert names(plane, "exporters", ns, *instances) == []
        assert first_lease_list(plane, user) is None
        installed = datetime.now(UTC)
        started = time.monotonic()
        install_crds(plane)  # applied, then waited for until Established
        with running_jumpstarter(plane, ns, tmp_path / "jumpstarter") as jumpstarter:
            ready = time.monotonic() - started
            assert names(plane, "exporters", ns, *instances) == []  # still none without one
            asked = time.monotonic()
            jumpstarter.request_lease("board=late", "first")
            until(
                "an instance for the Lease",
                lambda: len(names(plane, "exporters", ns, *instances)) == 1,
                60,
            )
            recovery("CRDs installed late: instance created", time.monotonic() - started)
            recovery("CRDs installed late: Lease asked for -> instance", time.monotonic() - asked)
            recovery("CRDs installed late: Jumpstarter's controller ready", ready)
            # The same reconciler's cache listed the Leases, answered, once they were served
            # (its retry: 0.5 s doubling to at most 2 s).
            listed = first_lease_list(plane, user)
            assert listed is not None and listed >= installed, (listed, installed)
            found = (listed - installed).total_seconds()
            recovery("CRDs installed late: the reconciler's first list of Leases", found)
            # Jumpstarter's controller pends the Lease on the instance, whose exporter is not
            # running here (no `jmp run`): Offline, never ended.
            until("the Lease pending Offline", lambda: lease_state(plane, ns, "first") == (
                [("Pending", "Offline")], False), 30)  # fmt: skip
            reconciler.check_alive()
            jumpstarter.check_alive()
