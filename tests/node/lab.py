"""The Jumpstarter side of the node install (tests/node/install.py): the namespace the
operator's Jumpstarter serves, its pool (`examples/node/pool/`), and the release's client
and Leases there, as the 0.9.0 controller reports them
(controller/internal/controller/lease_controller.go of the release)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from harness.jumpstarter import create_client_config
from harness.kubeget import find_json
from pool.model.keys import instance_selector
from tests.e2e.objects import get_json
from tests.node.install import Install

LAB = "jumpstarter-lab"  # the Jumpstarter resource's namespace (examples/node/)
JUMPSTARTER_DEPLOYMENTS = ("jumpstarter-controller", "jumpstarter-router-0")
NODEPORTS = {"jumpstarter-controller": 30010, "jumpstarter-router-0": 30011}
CA_FILE = ".run/jumpstarter-tls/ca.crt"  # where the page's `certs` wrote the CA
POOL, SELECTOR = "guest", "pool=guest"  # examples/node/pool/
LEASE_DURATION = timedelta(minutes=30)  # longer than any test holds a Lease
# The Pending reasons of the 0.9.0 lease controller for a Lease that waits for an instance:
# its Exporters not online yet, all leased, or cleaning up after a lease.
PENDING_REASONS = {"Offline", "NotAvailable", "NotReady"}
# The conditions it sets as it ends a Lease it cannot serve (and then marks ended).
ENDING_CONDITIONS = {"Unsatisfiable", "Invalid"}


def available(installed: Install, namespace: str, name: str) -> bool:
    status = get_json(installed.cluster, "deployment", name, "-n", namespace).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return conditions.get("Available") == "True"


# The 0.9.0 controller's leader election Lease (controller/cmd/main.go of the release).
CONTROLLER_ELECTION = "a38b78e7.jumpstarter.dev"


def jumpstarter_serving(installed: Install) -> bool:
    """Jumpstarter answers again after its Pods were replaced (a drain): its controller
    and router Available, none of their old Pods left, and the controller leading (a new
    controller Pod issues no credential and serves no exporter until the old one's
    election Lease is its)."""
    if not all(available(installed, LAB, name) for name in JUMPSTARTER_DEPLOYMENTS):
        return False
    pods = get_json(installed.cluster, "pods", "-n", LAB)["items"]
    ours = [p for p in pods if p["metadata"]["name"].startswith(JUMPSTARTER_DEPLOYMENTS)]
    if any("deletionTimestamp" in p["metadata"] for p in ours):
        return False
    election = find_json(installed.cluster, "lease", CONTROLLER_ELECTION, "-n", LAB) or {}
    holder = str(election.get("spec", {}).get("holderIdentity", ""))
    return any(holder.startswith(p["metadata"]["name"] + "_") for p in ours)


def instances(installed: Install, pool: str = POOL) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(
        installed.cluster, "exporters", "-n", LAB, "-l", instance_selector(pool)
    )["items"]
    return items


def online(exporter: dict[str, Any]) -> bool:
    conditions = (exporter.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Online" and c["status"] == "True" for c in conditions)


def successor(installed: Install, uid: str) -> dict[str, Any] | None:
    """The pool's one instance once the instance `uid` is gone and another replaced it,
    Online; None before."""
    found = instances(installed)
    new = [e for e in found if e["metadata"]["uid"] != uid]
    gone = all(e["metadata"]["uid"] != uid for e in found)
    return new[0] if new and gone and online(new[0]) else None


def pool_available(installed: Install) -> bool:
    status = get_json(installed.cluster, "exporterset", POOL, "-n", LAB).get("status") or {}
    return status.get("availableReplicas") == 1 and status.get("podsRunning") == 1


def owned_by(installed: Install, kind: str, uid: str) -> list[dict[str, Any]]:
    """The `kind` objects of the lab namespace whose owner is the object `uid`."""
    items = get_json(installed.cluster, kind, "-n", LAB)["items"]
    return [
        o for o in items if any(r["uid"] == uid for r in o["metadata"].get("ownerReferences") or [])
    ]


def client(installed: Install, name: str, out: Path) -> Any:
    """The release's client library as a new Client `name`, made as `jmp admin create
    client NAME --unsafe` makes one, the CA the page's `certs` made put in."""
    from jumpstarter.config.client import ClientConfigV1Alpha1

    ca = (installed.tree / CA_FILE).read_text()
    config = create_client_config(LAB, installed.cluster.kubeconfig, name, out, ca_pem=ca)
    return ClientConfigV1Alpha1.from_file(config)


def request_lease(jmp: Any, name: str, selector: str) -> None:
    """What `jmp create lease -l SELECTOR --lease-id NAME` asks the controller for."""
    jmp.create_lease(
        selector=selector, exporter_name=None, duration=LEASE_DURATION, begin_time=None,
        lease_id=name,
    )  # fmt: skip


def lease(installed: Install, name: str) -> dict[str, Any]:
    found: dict[str, Any] = get_json(installed.cluster, "leases.jumpstarter.dev", name, "-n", LAB)
    return found


def lease_state(found: dict[str, Any]) -> str:
    """`assigned` (status.exporterRef, not ended), `pending` (a Pending reason of the
    controller's, not ended), `new` (not reconciled yet), or what ended or refused it
    (`ended:REASON`, `CONDITION:REASON`)."""
    status = found.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    for kind in ENDING_CONDITIONS:
        if conditions.get(kind, {}).get("status") == "True":
            return f"{kind}:{conditions[kind]['reason']}"
    if status.get("ended"):
        return f"ended:{conditions.get('Ready', {}).get('reason', '')}"
    if (status.get("exporterRef") or {}).get("name"):
        return "assigned"
    pending = conditions.get("Pending", {})
    if pending.get("status") == "True" and pending.get("reason") in PENDING_REASONS:
        return "pending"
    return "new" if not conditions else f"other:{sorted(conditions)}"
