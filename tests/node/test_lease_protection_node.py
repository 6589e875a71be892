"""Deleting a pool under a lease, on the single-node cluster with its garbage collector: the
leased instance keeps serving (its Exporter terminating but kept by the lease protection,
its Pod running, its Secrets there) until its lease ends, then goes with its Pod and
Secrets, each step said by an Event; the instance no lease held goes at once.

The lease is a real one: requested with Jumpstarter 0.9.0's client (`jmp create lease`,
pinned to one instance), assigned by its released controller serving the namespace, which
writes the Exporter's `status.leaseRef`, and released with `jmp delete lease`, which that
controller ends. The figures printed are the times from the deletion and from the lease's
end. Waits are bounded polls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.jumpstarter import JumpstarterSupply
from pool.model.keys import LEASE_PROTECTION
from tests.e2e.objects import get_json
from tests.node.pool_support import Pool, fresh_pool

pytestmark = pytest.mark.timeout(900)

Obj = dict[str, Any]


@pytest.fixture
def pool(
    node_cluster: Any,
    jumpstarters: JumpstarterSupply,
    tmp_path: Path,
) -> Iterator[Pool]:
    with fresh_pool(node_cluster, jumpstarters, tmp_path) as running:
        yield running


def _exporter(pool: Pool, name: str) -> Obj | None:
    found = pool.cluster.kubectl(
        "get", "exporter", name, "-n", pool.namespace, "-o", "json", check=False
    )
    return json.loads(found.stdout) if found.returncode == 0 else None


def _owned_by(objects: list[Obj], uid: str) -> list[str]:
    return [
        o["metadata"]["name"]
        for o in objects
        if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
    ]


def _events(pool: Pool, name: str) -> list[tuple[str, str, str]]:
    """The Events about an object, in the order they were written."""
    items = get_json(pool.cluster, "events.events.k8s.io", "-n", pool.namespace)["items"]
    items.sort(key=lambda e: e.get("eventTime") or "")
    return [(e["reason"], e["type"], e["note"]) for e in items if e["regarding"]["name"] == name]


def test_a_pool_deleted_under_a_lease_keeps_the_leased_instance_until_the_lease_ends(
    pool: Pool,
) -> None:
    pool.apply(minReplicas=2, minAvailableReplicas=1)
    pool.wait_warm(2)
    leased, idle = sorted(pool.exporters(), key=lambda e: e["metadata"]["name"])
    name, uid = leased["metadata"]["name"], leased["metadata"]["uid"]
    idle_uid = idle["metadata"]["uid"]
    assert pool.lease("lease-4", exporter=name) == name
    pool.wait(
        f"{name} protected",
        lambda: LEASE_PROTECTION
        in ((_exporter(pool, name) or {})["metadata"].get("finalizers") or []),
    )
    secrets_before = _owned_by(list(pool.secrets().values()), uid)
    assert len(secrets_before) == 2  # its config Secret and its token

    deleted = time.monotonic()
    pool.cluster.kubectl("delete", "exporterset", pool.name, "-n", pool.namespace, "--wait=false")
    # The idle instance goes with the set, its Pod and Secrets with it...
    pool.wait(
        "the idle instance gone with its Pod and Secrets",
        lambda: not any(e["metadata"]["uid"] == idle_uid for e in pool.exporters())
        and not _owned_by(pool.pods(), idle_uid)
        and not _owned_by(list(pool.secrets().values()), idle_uid),
        timeout=120,
    )
    idle_gone = time.monotonic() - deleted
    # ...the leased one is deleted too, but stays, serving, with everything it runs on.
    held = pool.wait(
        f"{name} being deleted",
        lambda: (e := _exporter(pool, name)) and e["metadata"].get("deletionTimestamp") and e,
    )
    assert held["metadata"]["finalizers"] == [LEASE_PROTECTION]
    pool.wait(
        "the InstanceKept Event",
        lambda: any(reason == "InstanceKept" for reason, _, _ in _events(pool, name)),
    )
    time.sleep(10)  # a while under the lease: nothing of the instance goes
    assert _exporter(pool, name) is not None
    [pod] = [p for p in pool.running() if p["metadata"]["name"] == name]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == uid
    assert sorted(_owned_by(list(pool.secrets().values()), uid)) == sorted(secrets_before)
    lease = get_json(pool.cluster, "leases.jumpstarter.dev", "lease-4", "-n", pool.namespace)
    assert lease["status"]["exporterRef"]["name"] == name

    # The lease ends: the instance goes, Pod and Secrets (and the ended Lease) with it.
    ended = time.monotonic()
    pool.release("lease-4")
    pool.wait(
        f"{name} gone with its Pod and Secrets",
        lambda: _exporter(pool, name) is None
        and not _owned_by(pool.pods(), uid)
        and not _owned_by(list(pool.secrets().values()), uid),
        timeout=120,
    )
    gone = time.monotonic() - ended
    events = _events(pool, name)
    assert [r for r, _, _ in events if r.startswith("Instance")] == [
        "InstanceKept",
        "InstanceReleased",
    ]
    [(_, kind, note)] = [e for e in events if e[0] == "InstanceReleased"]
    assert kind == "Normal" and note.endswith("no lease holds it any more"), note
    print(
        f"\nset deleted -> idle instance, its Pod and Secrets gone: {idle_gone:.1f} s; "
        f"leased instance kept {ended - deleted:.1f} s while its lease ran; "
        f"lease ended -> it, its Pod and Secrets gone: {gone:.1f} s"
    )
