"""A pool on release 0.9.0's own Exporter CRD, served by its controller and `jmp run`.

The Exporter status fields only this project's CRD has (`tests.crddiff.only_ours`:
`leaseHooks`, `recordsLeaseHooks`, `tokenExpiresAt`; where each comes from:
`api.jumpstarter.CRD_DIFFERENCES_FROM_RELEASE`) are never written on such an install, and
the pool runs on their defaults. No hook record: no afterLease hook is owed, so an instance
the controller reports Available is warm; it is leased, recognised as released by the
pool's own served-lease mark (no hook record names the lease) and replaced. Nothing here
reads `tokenExpiresAt`: a rotated token reaches the config Secret from the credential
Secret (tests/e2e/test_jumpstarter_e2e.py). A status write carrying the three is accepted
and pruned whole, so nothing the pool reads changes: the reconciler and the webhook make
no such write (tests/unit/test_release_crds.py). Waits are bounded polls, not timings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import REPO_ROOT, ControlPlane
from harness.jumpstarter import Jumpstarter
from pool.model.keys import SERVED_LEASE, instance_selector
from tests.census import Census
from tests.crddiff import only_ours
from tests.e2e.objects import (
    NOW,
    apply,
    exporter_set,
    get_json,
    set_status,
    virtual_target_class,
    wait_for,
)
from tests.exporters import ExporterProcesses

OUR_CRD = REPO_ROOT / "crds" / "jumpstarter" / "jumpstarter.dev_exporters.yaml"
# What a newer exporter would record: a lease whose afterLease hook it still owes.
OWED = {
    "recordsLeaseHooks": True,
    "leaseHooks": {"leaseRef": {"name": "lease-a"}, "beforeLease": {"phase": "Succeeded"}},
    "tokenExpiresAt": NOW,
}


def instances(plane: ControlPlane, ns: str) -> dict[str, dict[str, Any]]:
    items = get_json(plane, "exporters", "-n", ns, "-l", instance_selector("pool"))["items"]
    return {e["metadata"]["name"]: e for e in items if not e["metadata"].get("deletionTimestamp")}


def counted(plane: ControlPlane, ns: str, available: int, leased: int) -> bool:
    status = set_status(plane, ns)
    return (status.get("availableReplicas"), status.get("leasedReplicas")) == (available, leased)


def test_a_pool_on_the_releases_exporter_crd_runs_without_the_fields_only_ours_has(
    control_plane: ControlPlane,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    reconcile: Callable[[], Path],
) -> None:
    plane, ns = control_plane, jumpstarter.namespace
    installed = get_json(plane, "crd", "exporters.jumpstarter.dev")
    only = only_ours(yaml.safe_load(OUR_CRD.read_text()), installed)
    assert only == ["status.leaseHooks", "status.recordsLeaseHooks", "status.tokenExpiresAt"]
    fields = {path.removeprefix("status.") for path in only}
    census = Census(plane, ns)  # every status of every Exporter the namespace shows
    try:
        apply(plane, virtual_target_class("qemu", ns))
        pool = exporter_set("pool", ns, class_name="qemu", labels={"board": "pool"},
                            with_template=True, minAvailableReplicas=1, maxReplicas=3)  # fmt: skip
        apply(plane, pool)
        reconcile()
        (first,) = wait_for(
            "one warm instance", lambda: counted(plane, ns, 1, 0) and instances(plane, ns)
        ).values()
        status = first["status"]
        kinds = {c["type"]: c["status"] for c in status["conditions"]}
        assert (kinds["Registered"], kinds["Online"]) == ("True", "True")
        assert status["exporterStatus"] == "Available" and not fields & set(status)

        # Leased: busy by its leaseRef, marked served by the pool; a replacement is warm.
        jumpstarter.request_lease("board=pool", "lease-a")
        leased = first["metadata"]["name"]
        wait_for("leased 1, 1 warm", lambda: counted(plane, ns, 1, 1))
        held = get_json(plane, "exporter", leased, "-n", ns)
        assert held["status"]["leaseRef"]["name"] == "lease-a" and not fields & set(held["status"])
        assert held["metadata"]["annotations"][SERVED_LEASE] == "lease-a"

        # Released under ExitAndReplace: it goes; the pool is one warm instance again.
        jumpstarter.release_lease("lease-a")

        def refilled() -> dict[str, Any]:
            now = instances(plane, ns)
            return now if leased not in now and counted(plane, ns, 1, 0) else {}

        (spare,) = wait_for("the released one gone, one warm", refilled)

        # A write of the three fields is accepted and pruned: nothing of it is stored.
        body = json.dumps({"status": OWED})
        written = plane.kubectl("patch", "exporter", spare, "-n", ns, "--subresource=status",
                                "--type=merge", "-p", body, "-o", "json")  # fmt: skip
        assert not fields & set(json.loads(written.stdout)["status"])
        assert not fields & set(get_json(plane, "exporter", spare, "-n", ns)["status"])
        assert counted(plane, ns, 1, 0)
        # Every status the watch showed, leased ones too, lacked them.
        assert census.ever >= {leased, spare} and "leaseRef" in census.status_fields
        assert not fields & census.status_fields
    finally:
        census.stop()
