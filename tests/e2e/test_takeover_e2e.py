"""Taking over a live pool from Jumpstarter's own exporter-set controller.

The test builds the state that controller leaves (`../shared/reference/jumpstarter`, as
its tests show it): Exporters named by generateName, controller-owned by the set, with
the template's labels only; their Pods named as the Exporters, controller-owned by them
and labelled `exporterset.jumpstarter.dev/name`; config Secrets
`exporter-config-<exporter>` with exactly that label; and a surplus whose cooldown began
before the switch, in the set's `exporterset.jumpstarter.dev/surplus-since`. Then ours
starts on it: nothing is created or deleted because of the switch, every Pod and Secret
keeps its uid, and the surplus goes when its cooldown ends, not a full cooldown after
the switch. Once in each scope, as each keeps that memory elsewhere: cluster-wide (on a
control plane of its own, so no other test's sets are in it) the annotation, cleared
when the surplus is gone; namespaced a Lease beside the set, the set's annotation only
read. The Pods are set Running by hand (no kubelet here).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.stack import running_reconciler
from pool.model.keys import NAME_LABEL, SET_LABEL, SURPLUS_SINCE
from pool.model.timefmt import format_time
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    install_lease_crd,
    playing_credentials,
    surplus_memory,
    virtual_target_class,
    wait_for,
)
from tests.e2e.objects import play_registered as register
from tests.e2e.test_replacement_e2e import instances, patch

COOLDOWN = 60  # seconds
LEFT = 20  # of the cooldown, when ours starts


def owned_by(owner: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    meta = owner["metadata"]
    return [
        {
            "apiVersion": owner["apiVersion"],
            "kind": kind,
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def jumpstarters_pool(plane: ControlPlane, ns: str) -> tuple[datetime, dict[str, str]]:
    """The pool as Jumpstarter's controller leaves it: 3 instances for a warm buffer of
    2, the surplus noted `COOLDOWN - LEFT` seconds ago. Returns that moment, and the uid
    of every object by kind/name."""
    apply(plane, virtual_target_class("qemu", ns))
    pool = exporter_set(
        "pool",
        ns,
        class_name="qemu",
        labels={"board": "taken"},
        with_template=True,
        minAvailableReplicas=2,
        maxReplicas=3,
        scaleDownCooldown=f"{COOLDOWN}s",
    )
    apply(plane, pool)
    the_set = get_json(plane, "exporterset", "pool", "-n", ns)
    uids: dict[str, str] = {}
    for _ in range(3):
        exporter = {
            "apiVersion": "jumpstarter.dev/v1alpha1",
            "kind": "Exporter",
            "metadata": {
                "generateName": "pool-",
                "namespace": ns,
                "labels": {"board": "taken"},
                "ownerReferences": owned_by(the_set, "ExporterSet"),
            },
            "spec": {"enabled": True},
        }
        made = plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(exporter)).stdout
        created = json.loads(made)
        name = created["metadata"]["name"]
        register(plane, ns, name)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"exporter-config-{name}",
                "namespace": ns,
                "labels": {NAME_LABEL: "pool"},
                "ownerReferences": owned_by(created, "Exporter"),
            },
            "data": {"config.yaml": base64.b64encode(b"{}").decode()},
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"board": "taken", NAME_LABEL: "pool"},
                "ownerReferences": owned_by(created, "Exporter"),
            },
            "spec": {"containers": [{"name": "exporter", "image": "exporter"}]},
        }
        apply(plane, secret, pod)
        patch(plane, ns, "pod", name, {"status": {"phase": "Running"}}, "--subresource=status")
        uids[f"Exporter/{name}"] = created["metadata"]["uid"]
    for kind, resource in (("Pod", "pods"), ("Secret", "secrets")):
        for item in get_json(plane, resource, "-n", ns)["items"]:
            if (item["metadata"].get("labels") or {}).get(NAME_LABEL) == "pool":
                uids[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["uid"]
    # Jumpstarter's controller noted the surplus a while ago (written last, so the slow
    # setup above does not eat the cooldown).
    since = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=COOLDOWN - LEFT)
    mark = {"metadata": {"annotations": {SURPLUS_SINCE: format_time(since)}}}
    patch(plane, ns, "exporterset", "pool", mark)
    return since, uids


def snapshot(plane: ControlPlane, ns: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for exporter in instances(plane, ns) + [
        e
        for e in get_json(plane, "exporters", "-n", ns)["items"]
        if SET_LABEL not in (e["metadata"].get("labels") or {})
        and not e["metadata"].get("deletionTimestamp")
    ]:
        found[f"Exporter/{exporter['metadata']['name']}"] = exporter["metadata"]["uid"]
    for kind, resource in (("Pod", "pods"), ("Secret", "secrets")):
        for item in get_json(plane, resource, "-n", ns)["items"]:
            if (item["metadata"].get("labels") or {}).get(NAME_LABEL) == "pool":
                found[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["uid"]
    return found


@pytest.fixture(scope="module")
def plane_of_its_own() -> Iterator[ControlPlane]:
    """For the cluster-wide run: a reconciler of the whole cluster finds no other test's
    sets in it."""
    with running_control_plane() as plane:
        install_lease_crd(plane)
        yield plane


@pytest.mark.parametrize("scope", ["cluster", "namespace"])
def test_a_pool_jumpstarters_controller_filled_is_taken_over_without_churn(
    request: pytest.FixtureRequest, tmp_path: Path, scope: str
) -> None:
    """Either memory the scope uses honours the running cooldown: cluster-wide the set's
    annotation (then cleared), namespaced the set's Lease (the set itself not written)."""
    if scope == "cluster":
        plane: ControlPlane = request.getfixturevalue("plane_of_its_own")
        ns = f"t-{secrets.token_hex(4)}"
        plane.kubectl("create", "namespace", ns)
        extra = ["--no-leader-election"]
    else:
        plane = request.getfixturevalue("control_plane")
        ns = request.getfixturevalue("namespace")
        install_lease_crd(plane)
        extra = ["--namespace", ns, "--no-leader-election"]
    with playing_credentials(plane, ns):
        since, before = jumpstarters_pool(plane, ns)
        assert len(before) == 9, before
        switched = time.monotonic()
        with running_reconciler(plane, tmp_path, extra=extra) as reconciler:
            wait_for("ours running", lambda: "reconciling (" in reconciler.log_tail(400))
            time.sleep(3)  # passes over the taken-over pool, well inside the remaining cooldown
            # no create, no delete, same uids
            assert snapshot(plane, ns) == before, reconciler.log_tail(200)

            def one_removed() -> dict[str, str] | None:
                now = snapshot(plane, ns)
                exporters = [k for k in now if k.startswith("Exporter/")]
                return now if len(exporters) == 2 else None

            after = wait_for("the surplus removed", one_removed, timeout=COOLDOWN + 30)
            removed_after = time.monotonic() - switched
            due = since + timedelta(seconds=COOLDOWN)
            print(
                f"\n{scope}: surplus noted {since:%H:%M:%S} by Jumpstarter's controller, "
                f"cooldown {COOLDOWN}s, ours started {COOLDOWN - LEFT}s into it; removed "
                f"{removed_after:.1f}s after the switch (due {due:%H:%M:%S})"
            )
            assert removed_after < COOLDOWN, "a full cooldown after the switch, not when it ended"
            gone = set(before) - set(after)
            assert {k.split("/")[0] for k in gone} <= {"Exporter", "Pod", "Secret"}
            assert len([k for k in gone if k.startswith("Exporter/")]) == 1
            for key, uid in after.items():  # what stays kept its uid; nothing new appeared
                assert before.get(key) == uid, key

            # No surplus left: the scope's memory holds none.
            def annotation() -> str | None:
                meta = get_json(plane, "exporterset", "pool", "-n", ns)["metadata"]
                return (meta.get("annotations") or {}).get(SURPLUS_SINCE)

            if scope == "cluster":
                wait_for("the annotation cleared", lambda: annotation() is None)
                assert surplus_memory(plane, ns, "pool") is None  # no Lease: the set holds it
            else:
                wait_for("the Lease cleared", lambda: surplus_memory(plane, ns, "pool") == "")
                # the set, which a namespaced install may not write, is left as it was
                assert annotation() == format_time(since)
            reconciler.check_alive()
