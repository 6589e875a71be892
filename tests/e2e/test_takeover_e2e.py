"""Taking over a live pool from Jumpstarter's own exporter-set controller.

The test builds the state that controller leaves (`../shared/reference/jumpstarter`, as
its tests show it): Exporters named by generateName, controller-owned by the set, with
the template's labels only; their Pods named as the Exporters, controller-owned by them
and labelled `exporterset.jumpstarter.dev/name`; config Secrets
`exporter-config-<exporter>` with exactly that label; and a surplus whose cooldown began
before the switch, in the set's `exporterset.jumpstarter.dev/surplus-since`. Then ours
starts on it: nothing is created or deleted because of the switch, every Exporter, Pod
and Secret keeps its uid, and the surplus goes when its cooldown ends, not a full
cooldown after the switch. Once in each scope, as each keeps that memory elsewhere:
cluster-wide (on a control plane of its own, so no other test's sets are in it) the
annotation, cleared when the surplus is gone; namespaced a Lease beside the set, the
set's annotation only read.

Jumpstarter's released 0.9.0 controller serves the namespace in both (namespaced, the
`jumpstarter` fixture's; cluster-wide, one started on that plane with
`harness.jumpstarter.running_jumpstarter`, which installs the release's CRDs): it issues
each Exporter's credential (`status.credential`, `status.endpoint`), and each config
Secret holds the `ExporterConfig` the pool renders from them (that endpoint, the token of
that credential Secret, the CA of the install's `jumpstarter-service-ca-cert`, the
template's drivers). Each Pod's exporter is the release's `jmp run` on that config
(`tests.exporters`), so Registered and Online are what the controller writes once it
registered. What is played: the exporter-set controller's writes (the objects above, and
the annotation) and the kubelet's part: no kubelet runs here, so the Pods are set Running
by hand (`kubectl patch --subresource=status`) and `tests.exporters` starts the command.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import Jumpstarter, running_jumpstarter
from harness.stack import running_reconciler
from pool.model.jumpstarter import (
    CONFIG_KEY,
    DEFAULT_CA_CONFIGMAP,
    DEFAULT_CA_KEY,
    config_secret_name,
)
from pool.model.keys import NAME_LABEL, SET_LABEL, SURPLUS_SINCE
from pool.model.timefmt import format_time
from pool.rendering.render import Credentials, InstanceContext, config_text
from pool.rendering.render import exporter_config as render_exporter_config
from tests.e2e.objects import (
    apply,
    credential,
    exporter_set,
    get_json,
    surplus_memory,
    virtual_target_class,
    wait_for,
)
from tests.e2e.test_replacement_e2e import instances, patch
from tests.exporters import DRIVERS, ExporterProcesses, running_exporters

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


def issued(plane: ControlPlane, ns: str, exporter: str) -> tuple[str, str] | None:
    """(endpoint, token) Jumpstarter's controller issued the Exporter, None before."""
    status = get_json(plane, "exporter", exporter, "-n", ns).get("status") or {}
    _, token = credential(plane, ns, exporter)
    endpoint = str(status.get("endpoint") or "")
    return (endpoint, token) if endpoint and token else None


def exporter_config(
    plane: ControlPlane, ns: str, exporter: str, drivers: list[dict[str, Any]]
) -> str:
    """`config.yaml` of the instance's config Secret, as the pool renders it
    (`pool.rendering.render.exporter_config`): the controller's endpoint, the token of the
    credential it issued, the install's CA, the template's drivers."""
    endpoint, token = wait_for(
        f"{exporter}'s credential", lambda: issued(plane, ns, exporter), timeout=60
    )
    ca = get_json(plane, "configmap", DEFAULT_CA_CONFIGMAP, "-n", ns)["data"][DEFAULT_CA_KEY]
    issued_to = Credentials(endpoint, token, base64.b64encode(ca.encode()).decode())
    instance = InstanceContext(
        namespace=ns, exporter=exporter, exporter_uid="", labels={}, set_name="pool",
        parameters={}, images={}, recycle="ExitAndReplace",  # the set's default
        credentials=issued_to,
    )  # fmt: skip
    config = render_exporter_config(instance, drivers)
    return config_text(config)


def online(plane: ControlPlane, ns: str, exporter: str) -> bool:
    """Jumpstarter's controller shows the Exporter Registered and Online."""
    status = get_json(plane, "exporter", exporter, "-n", ns).get("status") or {}
    found = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return found.get("Registered") == found.get("Online") == "True"


def jumpstarters_pool(plane: ControlPlane, ns: str) -> tuple[datetime, dict[str, str]]:
    """The pool as Jumpstarter's controller leaves it: 3 instances for a warm buffer of
    2, each registered and online, the surplus noted `COOLDOWN - LEFT` seconds ago.
    Returns that moment, and the uid of every object by kind/name."""
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
    pool["spec"]["template"]["spec"] = {"drivers": DRIVERS}
    apply(plane, pool)
    the_set = get_json(plane, "exporterset", "pool", "-n", ns)
    uids: dict[str, str] = {}
    made: list[dict[str, Any]] = []
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
        out = plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(exporter)).stdout
        made.append(json.loads(out))
    for created in made:
        name = created["metadata"]["name"]
        uids[f"Exporter/{name}"] = created["metadata"]["uid"]
        config = exporter_config(plane, ns, name, the_set["spec"]["template"]["spec"]["drivers"])
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": config_secret_name(name),
                "namespace": ns,
                "labels": {NAME_LABEL: "pool"},
                "ownerReferences": owned_by(created, "Exporter"),
            },
            "type": "Opaque",
            "data": {CONFIG_KEY: base64.b64encode(config.encode()).decode()},
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
        # the kubelet's part: no kubelet runs here (`tests.exporters` runs the command)
        patch(plane, ns, "pod", name, {"status": {"phase": "Running"}}, "--subresource=status")
    for created in made:
        name = created["metadata"]["name"]
        wait_for(f"{name} registered and online", partial(online, plane, ns, name), timeout=90)
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
    sets in it. The `jumpstarter.dev` kinds are the release's own CRDs."""
    with running_control_plane(jumpstarter=True) as plane:
        yield plane


def served(
    request: pytest.FixtureRequest, tmp_path: Path, scope: str, stack: contextlib.ExitStack
) -> tuple[ControlPlane, str, Jumpstarter, ExporterProcesses]:
    """The plane and a namespace Jumpstarter's 0.9.0 controller serves, with each instance
    Pod's `jmp run` running there while `stack` is open."""
    if scope == "cluster":
        plane: ControlPlane = request.getfixturevalue("plane_of_its_own")
        ns = f"t-{secrets.token_hex(4)}"
        plane.kubectl("create", "namespace", ns)
        running = stack.enter_context(running_jumpstarter(plane, ns, tmp_path / "jumpstarter"))
        processes = stack.enter_context(running_exporters(plane, ns, tmp_path / "exporters"))
        return plane, ns, running, processes
    return (
        request.getfixturevalue("control_plane"),
        request.getfixturevalue("ns"),
        request.getfixturevalue("jumpstarter"),
        request.getfixturevalue("exporters"),
    )


@pytest.mark.parametrize("scope", ["cluster", "namespace"])
def test_a_pool_jumpstarters_controller_filled_is_taken_over_without_churn(
    request: pytest.FixtureRequest, tmp_path: Path, scope: str
) -> None:
    """Either memory the scope uses honours the running cooldown: cluster-wide the set's
    annotation (then cleared), namespaced the set's Lease (the set itself not written)."""
    with contextlib.ExitStack() as stack:
        plane, ns, jumpstarter, exporters = served(request, tmp_path, scope, stack)
        extra = (
            ["--no-leader-election"]
            if scope == "cluster"
            else ["--namespace", ns, "--no-leader-election"]
        )
        since, before = jumpstarters_pool(plane, ns)
        assert len(before) == 9, before
        # each Pod's exporter is the release's `jmp run`, started for it
        assert sorted(exporters.started) == sorted(k[4:] for k in before if k.startswith("Pod/"))
        switched = time.monotonic()
        with running_reconciler(plane, tmp_path, extra=extra) as reconciler:
            wait_for("ours running", lambda: "reconciling (" in reconciler.log_tail(400))
            time.sleep(3)  # passes over the taken-over pool, well inside the remaining cooldown
            # no create, no delete, same uids
            assert snapshot(plane, ns) == before, reconciler.log_tail(200)

            def one_removed() -> dict[str, str] | None:
                now = snapshot(plane, ns)
                left = [k for k in now if k.startswith("Exporter/")]
                return now if len(left) == 2 else None

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
        jumpstarter.check_alive()
