"""The lease double (`tests/lease_double.py`) against a real kube-apiserver, where it plays
Jumpstarter 0.9.0's lease controller with `spec.beginTime`: a Lease booked for later gets
no exporter until its begin, and a scheduled Lease expires at its begin plus its duration
(`controller/internal/controller/lease_controller.go`, `reconcileStatusExporterRef` and
`reconcileStatusEnded`). Passes are run one by one (`sync`), so no thread races the test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from harness.controlplane import ControlPlane
from pool.model.timefmt import format_time, parse_time
from tests.e2e.objects import apply, get_json, install_lease_crd, set_status, wait_for
from tests.lease_double import LeaseDouble


def _exporter(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Exporter",
        "metadata": {"name": name, "namespace": namespace, "labels": {"board": "b"}},
        "spec": {"username": name},
    }


def _lease(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clientRef": {"name": "c"}, "selector": {"matchLabels": {"board": "b"}}, **spec},
    }


def _status(plane: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = (
        get_json(plane, "leases.jumpstarter.dev", name, "-n", ns).get("status") or {}
    )
    return status


def test_a_lease_booked_for_later_waits_for_its_begin_and_expires_from_it(
    control_plane: ControlPlane, namespace: str
) -> None:
    plane, ns = control_plane, namespace
    install_lease_crd(plane)
    double = LeaseDouble(plane.api_client())
    double.serve(ns)
    for name in ("e1", "e2"):
        apply(plane, _exporter(name, ns))
        set_status(plane, ns, name)
    now = datetime.now(UTC).replace(microsecond=0)
    apply(plane, _lease("tomorrow", ns, beginTime=format_time(now + timedelta(days=1)),
                        duration="1h0m0s"))  # fmt: skip
    double.sync(ns)
    assert _status(plane, ns, "tomorrow") == {}  # no exporter, no condition: it waits

    # Begun an hour ago for 30 minutes: served at once, and over at its begin plus duration
    # (30 minutes ago), not 30 minutes after the moment it was served.
    apply(plane, _lease("late", ns, beginTime=format_time(now - timedelta(hours=1)),
                        duration="30m0s"))  # fmt: skip
    double.sync(ns)
    late = _status(plane, ns, "late")
    assert late["exporterRef"] == {"name": "e1"} and not late.get("ended")
    double.sync(ns)
    late = _status(plane, ns, "late")
    assert late["ended"] is True
    assert [c["reason"] for c in late["conditions"] if c["type"] == "Ready"] == ["Expired"]

    # Booked two seconds ahead: served only once its begin has come.
    begin = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    apply(plane, _lease("soon", ns, beginTime=format_time(begin), duration="1h0m0s"))
    double.sync(ns)
    assert "exporterRef" not in _status(plane, ns, "soon")

    def served() -> dict[str, Any] | None:
        double.sync(ns)
        status = _status(plane, ns, "soon")
        return status if status.get("exporterRef") else None

    soon = wait_for("the booked lease served at its begin", served, 30)
    assert parse_time(soon["beginTime"]) >= begin
    assert "exporterRef" not in _status(plane, ns, "tomorrow")
