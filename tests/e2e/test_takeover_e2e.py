"""Switching a namespace's pools between Jumpstarter main's own exporter-set controller and
this product, both ways.

Jumpstarter main's controller is the real one (`harness.jumpstarter_main`: the binary
built from main's source by `make jumpstarter`), on a control plane of this module's own
that serves Jumpstarter's ExporterSet and VirtualTargetClass CRDs (main's, from the same
build: its controller reads them through its own Go types) beside the `jumpstarter.dev`
CRDs of the 0.9.0 release. Jumpstarter's released 0.9.0 controller serves the namespace:
it issues each Exporter's credential (main's controller renders the config Secret from
it, and the install's `jumpstarter-service-ca-cert`), registers the exporters and assigns
Leases. Each instance Pod's exporter is the release's `jmp run` on that Secret
(`tests.exporters`). What is played is the kubelet's part only: no kubelet runs here, so
each Pod is set Running by hand (`kubectl patch --subresource=status`) and
`tests.exporters` starts its command. No garbage collector runs either: an Exporter's
Pod and Secret outlive it unless a controller deletes them.

Takeover: main's controller fills four pools of an Immediate class: a floor
(`minReplicas`), a warm buffer, a surplus whose cooldown is running (noted in the set's
`exporterset.jumpstarter.dev/surplus-since`), and a pool with a leased instance (a Lease
that the 0.9.0 controller assigned). It is stopped, and this product starts under the
command Jumpstarter's operator runs (`exporter-set-controller`, with the operator's Role):
it waits for the election Lease main's controller held, then nothing is created or
deleted because of the switch, every uid is kept, the surplus goes when its cooldown ends
(ours counts from the set's annotation, which it may not write and leaves as it was),
and the leased instance keeps its Lease. What ours writes on what it took over: every
config Secret (the same configuration in other bytes: key order, `config: {}` for a
driver without one), and the leased instance's protection (finalizer and annotation).
Cluster-wide (`virtualtarget reconcile`, on a plane of its own, so no other test's sets
are in it) the surplus's memory is the annotation itself, cleared once the surplus is gone.

Hand-back: a pool this product filled (one instance leased) is handed to main's
controller, run as its operator runs it, under the operator's Role. It creates, deletes
and disables nothing and keeps every uid and the Lease; it rewrites every config Secret
into its own bytes (`syncConfigSecret`, every pass); it cannot start a cooldown (its
`surplus-since` is an update of the set, which that Role refuses), so it never scales
down. The instance ours protected keeps ours' finalizer: once its lease ends and its Pod
fails, main's controller deletes it on every pass and it stays Terminating.
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import json
import re
import secrets
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.storm import ended_status
from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import Jumpstarter, install_crds, running_jumpstarter
from harness.jumpstarter_main import install_crds as install_main_crds
from harness.jumpstarter_main import running_exporter_set_controller
from harness.stack import ChildProcess, running_reconciler
from pool.model.jumpstarter import CONFIG_KEY
from pool.model.keys import LEASE_PROTECTION, NAME_LABEL, SURPLUS_SINCE
from pool.model.reasons import SCALE_DOWN_COOLDOWN
from pool.model.timefmt import format_time, parse_time
from reconciler.runtime.leader import election_id
from tests.dropin import PROVISIONER, operators_kubeconfig, ours_dropped_in
from tests.e2e.objects import (
    apply,
    assigned_exporter,
    exporter_set,
    get_json,
    patch_spec,
    surplus_memory,
    virtual_target_class,
    wait_for,
)
from tests.exporters import DRIVERS, ExporterProcesses, running_exporters

COOLDOWN = 45  # seconds: the election Lease's expiry (15 s) and our start fit in it
FILL_TIMEOUT = 180
# The pools each takeover fills with main's controller: spec fields beside the template.
POOLS: dict[str, dict[str, Any]] = {
    "floor": {"minReplicas": 1},
    "warm": {"minAvailableReplicas": 2},
    "surplus": {"minAvailableReplicas": 2, "scaleDownCooldown": f"{COOLDOWN}s"},
    "leased": {"minAvailableReplicas": 1},
}
# How many instances each holds once filled (the leased pool: the leased one and a warm one).
FILLED = {"floor": 1, "warm": 2, "surplus": 2, "leased": 2}


# -- the cluster's state ----------------------------------------------------------------


def _live(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if not o["metadata"].get("deletionTimestamp")]


def exporters_of(plane: ControlPlane, ns: str, pool: str) -> list[dict[str, Any]]:
    return _live(get_json(plane, "exporters", "-n", ns, "-l", f"pool={pool}")["items"])


def online(exporter: dict[str, Any]) -> bool:
    found = {c["type"]: c["status"] for c in (exporter.get("status") or {}).get("conditions") or []}
    return found.get("Registered") == found.get("Online") == "True"


def snapshot(plane: ControlPlane, ns: str) -> dict[str, dict[str, Any]]:
    """Every Exporter, instance Pod and config Secret of the namespace, by kind/name."""
    found: dict[str, dict[str, Any]] = {}
    for item in _live(get_json(plane, "exporters", "-n", ns)["items"]):
        found[f"Exporter/{item['metadata']['name']}"] = item
    for kind, resource in (("Pod", "pods"), ("Secret", "secrets")):
        for item in _live(get_json(plane, resource, "-n", ns, "-l", NAME_LABEL)["items"]):
            found[f"{kind}/{item['metadata']['name']}"] = item
    return found


def uids(state: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {key: obj["metadata"]["uid"] for key, obj in state.items()}


def config_of(secret: dict[str, Any]) -> str:
    return base64.b64decode((secret.get("data") or {}).get(CONFIG_KEY, "")).decode()


def writes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, set[str]]:
    """What changed on the objects both hold, by object: `metadata.<part>`, `spec` (an
    Exporter's), `config.yaml` (a config Secret's); status aside."""
    changed: dict[str, set[str]] = {}
    for key in sorted(before.keys() & after.keys()):
        old, new = before[key], after[key]
        parts = {
            f"metadata.{part}"
            for part in ("labels", "annotations", "finalizers", "ownerReferences")
            if old["metadata"].get(part) != new["metadata"].get(part)
        }
        if key.startswith("Secret/") and config_of(old) != config_of(new):
            parts.add(CONFIG_KEY)
        if key.startswith("Exporter/") and old.get("spec") != new.get("spec"):
            parts.add("spec")
        if parts:
            changed[key] = parts
    return changed


def show_writes(
    who: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, set[str]]:
    """Print what `who` changed (a config Secret's first rewrite as a diff, its token and
    CA left out), and return it."""
    changed = writes(before, after)
    print(f"{who} wrote:")
    for key, parts in changed.items():
        detail = {p: after[key]["metadata"].get(p[9:]) for p in parts if p.startswith("metadata.")}
        print(f"  {key}: {sorted(parts)} {detail or ''}")
    rewritten = [k for k, parts in changed.items() if CONFIG_KEY in parts]
    if rewritten:
        old, new = (config_of(state[rewritten[0]]).splitlines() for state in (before, after))
        lines = difflib.unified_diff(old, new, "before", "after", lineterm="", n=1)
        print("  " + "\n  ".join(line for line in lines if not re.search(r"token:|ca:", line)))
    return changed


def conditions(plane: ControlPlane, ns: str) -> dict[str, list[str]]:
    """Each set's conditions as its controller wrote them: type, status, reason, message."""
    found: dict[str, list[str]] = {}
    for item in get_json(plane, "exportersets", "-n", ns)["items"]:
        written = (item.get("status") or {}).get("conditions") or []
        found[item["metadata"]["name"]] = [
            f"{c['type']}={c['status']} {c.get('reason')}: {c.get('message')}" for c in written
        ]
    return found


def event_notes(plane: ControlPlane, ns: str) -> list[str]:
    """The namespace's Events on ExporterSets: reason and note, one line each."""
    items = get_json(plane, "events", "-n", ns)["items"]
    return sorted(
        {
            f"{e.get('reason')}: {e.get('message') or e.get('note')}"
            for e in items
            if (e.get("involvedObject") or e.get("regarding") or {}).get("kind") == "ExporterSet"
        }
    )


def report(title: str, plane: ControlPlane, ns: str) -> None:
    print(f"\n{title}")
    for name, lines in sorted(conditions(plane, ns).items()):
        print(f"  {name}: " + "; ".join(lines))
    print("  events: " + " | ".join(event_notes(plane, ns)))


def cooldown_note(plane: ControlPlane, ns: str, name: str) -> str | None:
    """The message of the set's Progressing condition while ours waits out a cooldown."""
    for c in (get_json(plane, "exporterset", name, "-n", ns).get("status") or {}).get(
        "conditions"
    ) or []:
        if c["type"] == "Progressing" and c.get("reason") == SCALE_DOWN_COOLDOWN:
            return str(c.get("message"))
    return None


def annotation(plane: ControlPlane, ns: str) -> str | None:
    """The surplus pool's `surplus-since` annotation."""
    meta = get_json(plane, "exporterset", "surplus", "-n", ns)["metadata"]
    return (meta.get("annotations") or {}).get(SURPLUS_SINCE)


def play_kubelet(plane: ControlPlane, ns: str) -> None:
    """The kubelet's status part: every instance Pod still Pending is set Running
    (`tests.exporters` runs its command); one that ended stays ended."""
    for pod in _live(get_json(plane, "pods", "-n", ns, "-l", NAME_LABEL)["items"]):
        if (pod.get("status") or {}).get("phase") in (None, "Pending"):
            body = json.dumps({"status": {"phase": "Running"}})
            name = pod["metadata"]["name"]
            plane.kubectl(
                "patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p", body
            )


def filled(plane: ControlPlane, ns: str, sizes: dict[str, int], *alive: ChildProcess) -> bool:
    """Every pool holds its size, each instance registered and online."""
    for process in alive:
        process.check_alive()
    play_kubelet(plane, ns)
    for pool, size in sizes.items():
        found = exporters_of(plane, ns, pool)
        if len(found) != size or not all(online(e) for e in found):
            return False
    return True


def the_pools(plane: ControlPlane, ns: str, pools: dict[str, dict[str, Any]]) -> None:
    apply(plane, virtual_target_class("qemu", ns, bindingMode="Immediate"))
    for name, spec in pools.items():
        body = exporter_set(name, ns, class_name="qemu", with_template=True, maxReplicas=3, **spec)
        body["spec"]["template"]["spec"] = {"drivers": DRIVERS}
        apply(plane, body)


def lease_served(plane: ControlPlane, ns: str, lease: str) -> dict[str, Any]:
    status = get_json(plane, "leases.jumpstarter.dev", lease, "-n", ns).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return {
        "exporter": (status.get("exporterRef") or {}).get("name"),
        "ended": bool(status.get("ended")),
        "ready": conditions.get("Ready"),
    }


def lease_one(jumpstarter: Jumpstarter, plane: ControlPlane, ns: str, pool: str) -> str:
    """A Lease of the pool's labels that the 0.9.0 controller assigns; its Exporter."""
    jumpstarter.request_lease(f"pool={pool}", f"{pool}-lease")
    return str(
        wait_for(f"{pool}-lease assigned", lambda: assigned_exporter(plane, ns, f"{pool}-lease"))
    )


def logged(log: Path, message: str) -> list[str]:
    """For each of main's controller's log entries (zap's JSON lines) with `message`: the
    set it names, or its error."""
    found: list[str] = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("msg") == message:
                found.append(str(entry.get("error") or entry.get("name")))
    return found


def election_holder(plane: ControlPlane, ns: str) -> str:
    name = election_id(PROVISIONER)
    found = plane.kubectl("get", "leases.coordination.k8s.io", name, "-n", ns, "-o", "json")
    return str(json.loads(found.stdout)["spec"].get("holderIdentity") or "")


# -- the planes and processes -----------------------------------------------------------


@contextlib.contextmanager
def jumpstarters_plane() -> Iterator[ControlPlane]:
    """A plane serving Jumpstarter's CRDs: main's two kinds, the release's `jumpstarter.dev`."""
    with running_control_plane(install_crds=False) as plane:
        install_main_crds(plane)
        install_crds(plane)
        yield plane


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with jumpstarters_plane() as plane:
        yield plane


def served(
    plane: ControlPlane, tmp_path: Path, stack: contextlib.ExitStack
) -> tuple[str, Jumpstarter, ExporterProcesses]:
    """A fresh namespace that the 0.9.0 controller serves (it writes the install's
    `jumpstarter-service-ca-cert`, which main's controller renders from), with each
    instance Pod's `jmp run` running while `stack` is open."""
    ns = f"t-{secrets.token_hex(4)}"
    plane.kubectl("create", "namespace", ns)
    jumpstarter = stack.enter_context(running_jumpstarter(plane, ns, tmp_path / "jumpstarter"))
    exporters = stack.enter_context(running_exporters(plane, ns, tmp_path / "exporters"))
    return ns, jumpstarter, exporters


def jumpstarters_fill(
    plane: ControlPlane, ns: str, tmp_path: Path, stack: contextlib.ExitStack, **pools: Any
) -> ChildProcess:
    the_pools(plane, ns, pools)
    theirs = stack.enter_context(running_exporter_set_controller(plane, ns, tmp_path / "main"))
    sizes = {name: FILLED[name] - (name == "leased") for name in pools}
    wait_for("main's controller filled the pools", lambda: filled(plane, ns, sizes, theirs), 180)
    return theirs


def surplus_noted(plane: ControlPlane, ns: str) -> datetime:
    """The surplus pool's warm buffer lowered by one: the moment main's controller noted."""
    patch_spec(plane, "exporterset", "surplus", ns, minAvailableReplicas=1)
    noted = wait_for("main's controller noted the surplus", lambda: annotation(plane, ns))
    return parse_time(str(noted))


# -- the tests --------------------------------------------------------------------------


def test_pools_main_filled_are_taken_over_without_churn(
    plane: ControlPlane, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as stack:
        ns, jumpstarter, exporters = served(plane, tmp_path, stack)
        theirs = jumpstarters_fill(plane, ns, tmp_path, stack, **POOLS)
        leased = lease_one(jumpstarter, plane, ns, "leased")
        wait_for("a warm one beside the leased one", lambda: filled(plane, ns, FILLED, theirs))
        since = surplus_noted(plane, ns)
        before = snapshot(plane, ns)
        assert len([k for k in before if k.startswith("Exporter/")]) == sum(FILLED.values())
        assert sorted(exporters.started) == sorted(k[4:] for k in before if k.startswith("Pod/"))
        held_by = election_holder(plane, ns)
        assert held_by, "main's controller leads through the election Lease"
        report("main's controller's status and Events:", plane, ns)

        theirs.stop()
        switched = time.monotonic()
        ours = ours_dropped_in(plane, ns, tmp_path)
        stack.callback(ours.stop)
        wait_for("ours leads", lambda: "reconciling (" in ours.log_tail(400), COOLDOWN)
        led = time.monotonic() - switched
        # Ours counts the cooldown from the moment in the set's annotation.
        waiting = wait_for("ours' cooldown", lambda: cooldown_note(plane, ns, "surplus"))
        assert f"since {format_time(since)}; " in waiting, waiting
        assert election_holder(plane, ns) != held_by
        # No create, no delete, every uid kept while the cooldown runs.
        assert uids(snapshot(plane, ns)) == uids(before), ours.log_tail(200)

        def surplus_gone() -> dict[str, dict[str, Any]] | None:
            ours.check_alive()
            return None if len(exporters_of(plane, ns, "surplus")) != 1 else snapshot(plane, ns)

        after = wait_for("the surplus removed", surplus_gone, COOLDOWN + 60)
        removed = time.monotonic() - switched
        due = since + timedelta(seconds=COOLDOWN)
        gone = set(before) - set(after)
        assert [k.split("-")[0] for k in gone if k.startswith("Exporter/")] == ["Exporter/surplus"]
        # what stays kept its uid, and nothing new appeared
        assert uids(after) == {key: uid for key, uid in uids(before).items() if key not in gone}
        # The leased instance kept its Lease, which is still served.
        assert lease_served(plane, ns, "leased-lease") == {
            "exporter": leased,
            "ended": False,
            "ready": "True",
        }
        wait_for("the surplus forgotten", lambda: surplus_memory(plane, ns, "surplus") == "")
        # the set, which the operator's Role does not let ours write, is left as it was
        assert annotation(plane, ns) == format_time(since)
        print(
            f"\nmain's controller noted the surplus at {since:%H:%M:%S}, cooldown {COOLDOWN}s; "
            f"ours led {led:.1f}s after the switch (main's election Lease expiring), removed "
            f"the surplus {removed:.1f}s after it (due {due:%H:%M:%S})"
        )
        report("ours' status and Events after it:", plane, ns)
        changed = show_writes("ours, on what main's controller made,", before, after)
        # Ours rewrites every config Secret it keeps (its rendering of the same config
        # differs: see docs/comparison.md), and protects the leased instance; nothing else.
        assert changed == {
            **{k: {CONFIG_KEY} for k in after if k.startswith("Secret/")},
            f"Exporter/{leased}": {"metadata.annotations", "metadata.finalizers"},
        }
        assert after[f"Exporter/{leased}"]["metadata"]["finalizers"] == [LEASE_PROTECTION]
        ours.check_alive()
        jumpstarter.check_alive()


def test_cluster_wide_the_annotation_is_the_memory(tmp_path: Path) -> None:
    """`virtualtarget reconcile` of the whole cluster keeps a surplus's start in the set's
    annotation, where main's controller wrote it: the cooldown runs on, then it is cleared."""
    with jumpstarters_plane() as plane, contextlib.ExitStack() as stack:
        ns, jumpstarter, _ = served(plane, tmp_path, stack)
        theirs = jumpstarters_fill(plane, ns, tmp_path, stack, surplus=POOLS["surplus"])
        since = surplus_noted(plane, ns)
        before = uids(snapshot(plane, ns))
        theirs.stop()
        switched = time.monotonic()
        with running_reconciler(plane, tmp_path, extra=["--no-leader-election"]) as ours:
            wait_for("ours running", lambda: "reconciling (" in ours.log_tail(400))
            assert uids(snapshot(plane, ns)) == before, ours.log_tail(200)

            waiting = wait_for("ours' cooldown", lambda: cooldown_note(plane, ns, "surplus"))
            assert f"since {format_time(since)}; " in waiting, waiting
            assert annotation(plane, ns) == format_time(since)  # not restarted by the switch
            wait_for(
                "the surplus removed",
                lambda: len(exporters_of(plane, ns, "surplus")) == 1,
                COOLDOWN + 60,
            )
            print(
                f"\ncluster-wide: surplus noted {since:%H:%M:%S}, cooldown {COOLDOWN}s, removed "
                f"{time.monotonic() - switched:.1f}s after the switch"
            )
            wait_for("the annotation cleared", lambda: annotation(plane, ns) is None)
            assert surplus_memory(plane, ns, "surplus") is None  # no Lease: the set holds it
            ours.check_alive()
        jumpstarter.check_alive()


def test_a_pool_ours_filled_is_handed_back_to_mains_controller(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """Main's controller runs as its operator runs it, under the operator's Role: it takes
    the pools as they are, and it cannot start a cooldown (the Role grants no update on
    exportersets, and the cooldown's start is an annotation it writes with one)."""
    with contextlib.ExitStack() as stack:
        ns, jumpstarter, exporters = served(plane, tmp_path, stack)
        pools = {name: POOLS[name] for name in ("warm", "leased")}
        the_pools(plane, ns, pools)
        ours = ours_dropped_in(plane, ns, tmp_path)
        stack.callback(ours.stop)
        sizes = {"warm": 2, "leased": 1}
        wait_for("ours filled the pools", lambda: filled(plane, ns, sizes, ours), FILL_TIMEOUT)
        leased = lease_one(jumpstarter, plane, ns, "leased")
        sizes["leased"] = 2
        wait_for("a warm one beside the leased one", lambda: filled(plane, ns, sizes, ours))
        before = snapshot(plane, ns)
        ours.stop()

        theirs = stack.enter_context(
            running_exporter_set_controller(
                plane, ns, tmp_path / "main", kubeconfig=operators_kubeconfig(plane, ns, tmp_path)
            )
        )
        log = Path(theirs.log.name)

        def passed() -> bool:  # main's controller led and reconciled both sets
            theirs.check_alive()
            return set(pools) <= set(logged(log, "reconciling ExporterSet"))

        wait_for("main's controller reconciled both sets", passed, COOLDOWN)
        # A surplus in the warm pool, with a short cooldown: main's controller tries to note
        # it on the set, is refused, and tries again a cooldown later, never disabling one.
        patch_spec(plane, "exporterset", "warm", ns, minAvailableReplicas=1, scaleDownCooldown="2s")
        refusals = wait_for(
            "main's controller refused twice",
            lambda: [e for e in logged(log, "failed to set surplus-since annotation") if e][1:],
        )
        play_kubelet(plane, ns)
        after = snapshot(plane, ns)
        changed = show_writes("\nmain's controller, on what ours made,", before, after)
        print(f"its refusal: {refusals[0]}")
        report("status and Events, ours then main's controller's:", plane, ns)
        # Nothing created or deleted, every uid kept, nothing disabled; only the config
        # Secrets rewritten (`syncConfigSecret`, every pass); the Lease is still served.
        assert uids(after) == uids(before), theirs.log_tail(80)
        assert changed == {k: {CONFIG_KEY} for k in after if k.startswith("Secret/")}
        assert all(e["spec"].get("enabled") is not False for e in exporters_of(plane, ns, "warm"))
        assert "forbidden" in refusals[0]
        assert lease_served(plane, ns, "leased-lease") == {
            "exporter": leased,
            "ended": False,
            "ready": "True",
        }
        # The instance ours protected while leased keeps ours' finalizer: nothing removes
        # it once ours is gone. Its lease ends and its exporter stops (a crash; the
        # kubelet's part: the Pod Failed): main's controller deletes the Exporter, which
        # then stays Terminating.
        assert after[f"Exporter/{leased}"]["metadata"]["finalizers"] == [LEASE_PROTECTION]
        jumpstarter.release_lease("leased-lease")
        wait_for("the lease ended", lambda: lease_served(plane, ns, "leased-lease")["ended"])
        exporters.kill(leased)
        status = json.dumps({"status": ended_status(1, "killed")})
        plane.kubectl(
            "patch", "pod", leased, "-n", ns, "--subresource=status", "--type=merge", "-p", status
        )

        def deleted_twice() -> bool:  # deleted, then deleted again on a later pass
            theirs.check_alive()
            return logged(log, "deleted Exporter after terminal Pod (ExitAndReplace)")[1:] != []

        wait_for("main's controller deleted it", deleted_twice)
        stuck = get_json(plane, "exporter", leased, "-n", ns)["metadata"]
        print(f"{leased}: deletionTimestamp {stuck.get('deletionTimestamp')}, "
              f"finalizers {stuck.get('finalizers')}")  # fmt: skip
        assert stuck.get("deletionTimestamp") and stuck["finalizers"] == [LEASE_PROTECTION]
        theirs.check_alive()
        jumpstarter.check_alive()
