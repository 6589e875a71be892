"""The same input, both controllers, compared: what Jumpstarter main's exporter-set
controller and this product write, field by field, for each thing docs/comparison.md says
stays the same.

One control plane of this module's own serves Jumpstarter's CRDs (main's ExporterSet and
VirtualTargetClass, the 0.9.0 release's `jumpstarter.dev` kinds: `jumpstarters_plane`).
Two namespaces get the same VirtualTargetClass and ExporterSet, each served by its own
0.9.0 controller (credentials, registration, Leases) with each instance Pod's `jmp run`
(`tests.exporters`): in one, main's controller, built from its source, with the rights
its own RBAC markers ask for (so it can note a surplus on the set); in the other, this
product as Jumpstarter's operator runs it (`exporter-set-controller`, the operator's Role).
Both are driven through the same events, side by side: the fill; a Lease the 0.9.0
controller assigns, held while the pool refills, then released; a surplus whose cooldown
runs out; the set's deletion. The kubelet's part (a Pod set Running; an exporter that
exits at its lease's end, its Pod then Succeeded) and the garbage collector's
(`bench.storm.SecretCollector` with `cascade`) are played alike on both sides.

Once both pools settled after each event, what each wrote is recorded: Exporters, Pods and
config Secrets, the set's metadata and status, the Events, the election Lease. Each test
compares one part and prints it. A difference is allowed only where the table "What
differs, and why" of docs/comparison.md names it: each allowance cites its row (`ROWS`),
and a test checks the table still has each cited row.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import re
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import yaml

from bench.storm import SecretCollector
from harness.controlplane import REPO_ROOT, ControlPlane, ControlPlaneError
from harness.jumpstarter import Jumpstarter
from harness.jumpstarter_main import running_exporter_set_controller
from harness.stack import ChildProcess
from pool.model.jumpstarter import CONFIG_KEY, config_secret_name
from pool.model.keys import (
    LEASE_PROTECTION,
    REVISION,
    SERVED_LEASE,
    SET_LABEL,
    SURPLUS_SINCE,
)
from pool.model.reasons import (
    SCALING_LIMITED,
    SCALING_UNLIMITED,
    SET_DEGRADED,
    SET_RECOVERED,
    SET_UNAVAILABLE,
    WAITING_FOR_CREDENTIALS,
)
from reconciler.runtime.leader import election_id
from tests.dropin import PROVISIONER, ours_dropped_in
from tests.e2e.objects import (
    assigned_exporter,
    find_json,
    get_json,
    patch_spec,
    pool_memory,
    wait_for,
)
from tests.e2e.test_replacement_e2e import end_pod
from tests.e2e.test_takeover_e2e import (
    jumpstarters_plane,
    lease_served,
    online,
    play_kubelet,
    served,
    snapshot,
    the_pools,
)
from tests.exporters import ExporterProcesses

Obj = dict[str, Any]
SET = "pool"
SPEC = {"minAvailableReplicas": 2}  # beside `the_pools`' maxReplicas 3 and template
STAGES = ("filled", "leased", "released", "surplus", "deleted")
KINDS = ("Exporter", "Pod", "Secret")
SETTLE_TIMEOUT = 180
ELECTION = election_id(PROVISIONER)
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# The rows of docs/comparison.md's "What differs, and why" that allow a difference here,
# by the words their first cell starts with.
ROWS = {
    "scope": "Exporters carry `virtualtarget.jumpstarter.dev/exporterset`",
    "rollout": "A changed template, image, parameter or class reaches the running instances",
    "protection": "A busy instance carries the finalizer",
    "config": "The config Secret holds the same configuration in other bytes",
    "memory": "Under the Role of Jumpstarter's operator, a surplus is removed after its cooldown",
    "available": "`Available` follows the warm buffer",
    "degraded": "`Degraded` is True only for a failure",
    "limited": "`ScalingLimited` is True only while more instances are wanted",
    "words": "Condition messages and Event notes are this product's own words",
    "events": "Besides Jumpstarter's Events",
    "released": "Under `ExitAndReplace`, a released instance is replaced once its Lease",
    "pending": "A pending Lease adds to the warm buffer",
}


@dataclass
class Side:
    """One controller, its namespace, and what it wrote after each event."""

    who: str  # "main" or "ours"
    ns: str
    jumpstarter: Jumpstarter
    exporters: ExporterProcesses
    controller: ChildProcess | None = None
    seen: dict[str, Obj] = field(default_factory=dict)  # stage -> observation
    surplus_since: str = ""  # what it noted while the cooldown ran
    leased: str = ""  # the instance the Lease took
    kept_released: bool = False  # its released instance still there, its Pod Running


# -- observing ---------------------------------------------------------------------------


def the_set(plane: ControlPlane, ns: str) -> Obj | None:
    return find_json(plane, "exporterset", SET, "-n", ns)


def controllers_events(plane: ControlPlane, ns: str) -> list[Obj]:
    """The exporter-set controller's Events: on the set, or on an Exporter where this
    product's lease protection writes them (0.9.0's own are on Clients, Leases and
    Exporters, those with reasons of its own: `ExporterRegistered`, `ExporterUnregistered`)."""
    found = get_json(plane, "events", "-n", ns)["items"]
    return [
        e
        for e in found
        if e["involvedObject"]["kind"] == "ExporterSet"
        or (e["involvedObject"]["kind"], str(e["reason"])[:8]) == ("Exporter", "Instance")
    ]


def observe(plane: ControlPlane, ns: str) -> Obj:
    return {
        "objects": snapshot(plane, ns),
        "set": the_set(plane, ns),
        "events": controllers_events(plane, ns),
        "election": find_json(plane, "leases.coordination.k8s.io", ELECTION, "-n", ns),
        "memory": pool_memory(plane, ns, SET),
    }


def settled(plane: ControlPlane, side: Side, size: int, leased: int) -> bool:
    """The pool holds `size` enabled instances, all online, `leased` of them leased, each
    with its Pod Running, no surplus noted, and the set's status says so (a pass after the
    last change)."""
    assert side.controller is not None
    side.controller.check_alive()
    side.jumpstarter.check_alive()
    play_kubelet(plane, side.ns)
    objects = snapshot(plane, side.ns)
    found = [o for k, o in objects.items() if k.startswith("Exporter/")]
    pods = [o for k, o in objects.items() if k.startswith("Pod/")]
    if len(found) != size or len(pods) != size or not all(online(e) for e in found):
        return False
    if any(e["spec"].get("enabled") is False for e in found) or surplus_noted(plane, side):
        return False
    status = (the_set(plane, side.ns) or {}).get("status") or {}
    counts = ("replicas", "readyReplicas", "podsRunning", "leasedReplicas")
    return tuple(status.get(c) or 0 for c in counts) == (size, size, size, leased)


def both_settled(
    plane: ControlPlane, sides: list[Side], stage: str, size: int, leased: int
) -> None:
    wait_for(
        f"both pools {stage}",
        lambda: all([settled(plane, s, size, leased) for s in sides]),
        SETTLE_TIMEOUT,
    )
    for side in sides:
        side.seen[stage] = observe(plane, side.ns)


def events_quiet(plane: ControlPlane, sides: list[Side]) -> bool:
    """No new Event on either side for a second: a transition's Event follows the status
    write that holds it."""
    before = [len(controllers_events(plane, s.ns)) for s in sides]
    time.sleep(1)
    return before == [len(controllers_events(plane, s.ns)) for s in sides]


def surplus_noted(plane: ControlPlane, side: Side) -> str:
    """Since when the side notes a surplus: main's on the set, ours' in its memory Lease
    (allowed: ROWS["memory"])."""
    found = (the_set(plane, side.ns) or {"metadata": {}})["metadata"].get("annotations") or {}
    if side.who == "ours":
        found = pool_memory(plane, side.ns, SET) or {}
    return str(found.get(SURPLUS_SINCE) or "")


# -- driving both ------------------------------------------------------------------------


def lease_and_release(plane: ControlPlane, sides: list[Side]) -> None:
    """A Lease of the pool's labels on each side, held while its pool refills, then
    released. Main's config asks the exporter to exit at the lease's end (`exitOnLeaseEnd`,
    ours writes it too); 0.9.0's `jmp run` does not read it, so that exit is played on
    each side once ours has acted on the release: the exporter stopped (it unregisters) and
    its Pod Succeeded, where the Pod is still there."""
    ours = sides[1]
    for side in sides:
        side.jumpstarter.request_lease(f"pool={SET}", "lease")
    for side in sides:
        assigned = partial(assigned_exporter, plane, side.ns, "lease")
        side.leased = str(wait_for(f"{side.who}'s lease", assigned))
    both_settled(plane, sides, "leased", 3, 1)
    for side in sides:
        side.jumpstarter.release_lease("lease")
    wait_for(
        "both leases ended",
        lambda: all([lease_served(plane, s.ns, "lease")["ended"] for s in sides]),
    )
    wait_for(  # its Exporter and then its Pod: read between the two, the Pod was there
        "ours removed its released instance",
        lambda: all(
            find_json(plane, kind, ours.leased, "-n", ours.ns) is None
            for kind in ("exporter", "pod")
        ),
    )
    for side in sides:
        pod = find_json(plane, "pod", side.leased, "-n", side.ns)
        side.kept_released = pod is not None and pod["status"].get("phase") == "Running"
    for side in sides:
        side.exporters.kill(side.leased, signal.SIGTERM)
        if find_json(plane, "pod", side.leased, "-n", side.ns) is not None:
            with contextlib.suppress(ControlPlaneError):  # collected meanwhile
                end_pod(plane, side.ns, side.leased, 0, "lease ended")


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Side]]:
    tmp = tmp_path_factory.mktemp("differential")
    with jumpstarters_plane() as plane, contextlib.ExitStack() as stack:
        stop = threading.Event()
        stack.callback(stop.set)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            started = list(pool.map(lambda who: served(plane, tmp / who, stack), ("main", "ours")))
        sides = [Side(who, *found) for who, found in zip(("main", "ours"), started, strict=True)]
        main, ours = sides
        for side in sides:
            the_pools(plane, side.ns, {SET: SPEC})
            SecretCollector(plane, side.ns, cascade=True).start(stop)
        main.controller = stack.enter_context(
            running_exporter_set_controller(plane, main.ns, tmp / "main" / "controller")
        )
        ours.controller = ours_dropped_in(plane, ours.ns, tmp / "ours")
        stack.callback(ours.controller.stop)

        both_settled(plane, sides, "filled", 2, 0)
        lease_and_release(plane, sides)
        both_settled(plane, sides, "released", 2, 0)
        for side in sides:
            patch_spec(plane, "exporterset", SET, side.ns, minAvailableReplicas=1,
                       scaleDownCooldown="3s")  # fmt: skip
        for side in sides:
            noted = partial(surplus_noted, plane, side)
            side.surplus_since = str(wait_for(f"{side.who} noted the surplus", noted))
        wait_for(
            "both surpluses removed and forgotten",
            lambda: all([settled(plane, s, 1, 0) for s in sides]),
            SETTLE_TIMEOUT,
        )
        wait_for("the last transitions' Events", lambda: events_quiet(plane, sides))
        for side in sides:
            side.seen["surplus"] = observe(plane, side.ns)
            plane.kubectl("delete", "exporterset", SET, "-n", side.ns)
        wait_for(
            "both pools collected",
            lambda: not any([snapshot(plane, s.ns) for s in sides]),
            SETTLE_TIMEOUT,
        )
        for side in sides:
            side.seen["deleted"] = observe(plane, side.ns)
        yield sides


# -- comparing ---------------------------------------------------------------------------


def objects_of(side: Side, stage: str, kind: str) -> list[Obj]:
    found = side.seen[stage]["objects"]
    return [o for key, o in sorted(found.items()) if key.startswith(f"{kind}/")]


def owners(obj: Obj, side: Side, stage: str) -> list[Obj]:
    """Its ownerReferences with the owner's name and uid checked against the owner itself
    (the set, or the Exporter of the same instance) and then left out."""
    seen = side.seen[stage]
    refs = []
    for ref in obj["metadata"].get("ownerReferences") or []:
        owner = seen["set"] if ref["kind"] == "ExporterSet" else seen["objects"].get(
            f"Exporter/{ref['name']}"
        )  # fmt: skip
        assert owner is not None and owner["metadata"]["uid"] == ref["uid"], (side.who, ref)
        refs.append({k: v for k, v in ref.items() if k not in ("name", "uid")})
    return refs


def instance_of(obj: Obj) -> str:
    """The Exporter an object belongs to: itself, or its controller owner."""
    if obj["kind"] == "Exporter":
        return str(obj["metadata"]["name"])
    (ref,) = [r for r in obj["metadata"]["ownerReferences"] if r.get("controller")]
    return str(ref["name"])


def allowed_metadata(side: Side, kind: str, meta: Obj) -> Obj:
    """What of this product's metadata the table allows, taken out (for ours only)."""
    if side.who != "ours":
        return meta
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    finalizers = list(meta.get("finalizers") or [])
    if kind == "Exporter":
        labels.pop(SET_LABEL)  # ROWS["scope"]
        annotations.pop(SERVED_LEASE, None)  # ROWS["protection"], on the leased one
        finalizers = [f for f in finalizers if f != LEASE_PROTECTION]  # ROWS["protection"]
    if kind in ("Exporter", "Pod"):
        annotations.pop(REVISION)  # ROWS["rollout"]
    return {"labels": labels, "annotations": annotations, "finalizers": finalizers}


def metadata(side: Side, stage: str, kind: str) -> list[Obj]:
    """Each object's labels, annotations, finalizers and owners, name by its instance."""
    found = []
    for obj in objects_of(side, stage, kind):
        meta = obj["metadata"]
        kept = {p: meta.get(p) or ({} if p != "finalizers" else []) for p in
                ("labels", "annotations", "finalizers")}  # fmt: skip
        found.append({**allowed_metadata(side, kind, kept), "owners": owners(obj, side, stage)})
    return sorted(found, key=repr)


def config(secret: Obj, side: Side, stage: str) -> Obj:
    """The config Secret's ExporterConfig, what differs by namespace and instance checked
    against the side's own (name, namespace, the Exporter's endpoint and credential, the
    CA of the 0.9.0 install) and then left out."""
    loaded = yaml.safe_load(base64.b64decode(secret["data"][CONFIG_KEY]))
    exporter = side.seen[stage]["objects"][f"Exporter/{instance_of(secret)}"]
    assert loaded.pop("metadata") == {"name": exporter["metadata"]["name"], "namespace": side.ns}
    assert loaded.pop("endpoint") == exporter["status"]["endpoint"]
    assert loaded.pop("token").count(".") == 2  # a JWT the 0.9.0 controller issued
    assert base64.b64decode(loaded.pop("tls")["ca"]).decode() == side.jumpstarter.ca_pem
    if side.who == "ours":  # ROWS["config"]: `config: {}` for a driver without one
        for driver in loaded["export"].values():
            if driver.get("config") == {}:
                del driver["config"]
    return dict(loaded)


def shown(rows: dict[str, Any]) -> None:
    for name, value in rows.items():
        print(f"  {name}: {value}")


# -- the tests ---------------------------------------------------------------------------


def test_every_allowance_cites_a_row_of_what_differs() -> None:
    page = (REPO_ROOT / "docs" / "comparison.md").read_text()
    table = page.split("## What differs, and why", 1)[1]
    rows = [line.split(" | ", 1)[0].lstrip("| ") for line in table.splitlines()]
    for key, words in ROWS.items():
        assert any(row.startswith(words) for row in rows), (key, words)


def test_instances_are_named_by_their_set_and_pods_and_secrets_by_their_instance(
    sides: list[Side],
) -> None:
    for stage in STAGES[:-1]:
        names: dict[str, Counter[str]] = {}
        for side in sides:
            shapes: Counter[str] = Counter()
            for obj in (o for kind in KINDS for o in objects_of(side, stage, kind)):
                meta, instance = obj["metadata"], instance_of(obj)
                if obj["kind"] == "Exporter":
                    assert meta["generateName"] == f"{SET}-" and meta["name"].startswith(SET)
                    shapes[f"Exporter {meta['generateName']}*"] += 1
                elif obj["kind"] == "Pod":
                    assert meta["name"] == instance
                    shapes["Pod <its Exporter's name>"] += 1
                else:
                    assert meta["name"] == config_secret_name(instance)
                    shapes["Secret exporter-config-<its Exporter's name>"] += 1
            names[side.who] = shapes
        print(f"\n{stage}: " + "; ".join(f"{k}: {dict(v)}" for k, v in names.items()))
        assert names["main"] == names["ours"]


def test_labels_annotations_finalizers_and_owners_of_each_instance(sides: list[Side]) -> None:
    main, ours = sides
    for stage in STAGES[:-1]:
        for kind in KINDS:
            print(f"\n{stage} {kind}:")
            shown({side.who: metadata(side, stage, kind) for side in sides})
            assert metadata(main, stage, kind) == metadata(ours, stage, kind), (stage, kind)
    # what was taken out of ours' by the table's rows, where it stood
    leased = ours.seen["leased"]["objects"][f"Exporter/{ours.leased}"]["metadata"]
    assert leased["annotations"][SERVED_LEASE] == "lease"
    assert leased["finalizers"] == [LEASE_PROTECTION]


def test_the_set_keeps_its_metadata_and_the_surplus_since_when(sides: list[Side]) -> None:
    """Both note the surplus under `exporterset.jumpstarter.dev/surplus-since`, RFC 3339
    in UTC to the second; main's on the set, ours' in the Lease beside it under the
    operator's Role (ROWS["memory"]), and both clear it once the surplus is gone. Neither
    writes the set's labels or finalizers; main's update of the whole set is its write
    of the spec too (ROWS["memory"]), printed."""
    main, ours = sides
    print(f"\nsurplus since: main {main.surplus_since} (on the set), ours {ours.surplus_since} "
          f"(Lease surplus-since.{SET}: {ours.seen['surplus']['memory']})")  # fmt: skip
    for side in sides:
        assert RFC3339.fullmatch(side.surplus_since), side.surplus_since
    assert ours.seen["surplus"]["memory"] == {}  # the Lease is kept, the moment cleared
    for stage in STAGES[:-1]:
        sets = {side.who: side.seen[stage]["set"] for side in sides}
        for part in ("labels", "finalizers"):
            assert {s["metadata"].get(part) for s in sets.values()} == {None}, (stage, part)
        for side, the in zip(sides, sets.values(), strict=True):
            mine = set(the["metadata"].get("annotations") or {})
            assert mine == {"kubectl.kubernetes.io/last-applied-configuration"}, (side.who, mine)
        generations = {who: s["metadata"]["generation"] for who, s in sets.items()}
        specs = {who: s["spec"] for who, s in sets.items()}
        written = {k: v for k, v in specs["main"].items() if specs["ours"].get(k) != v}
        print(f"{stage}: generation {generations}; main's spec beside ours': {written}")


def test_config_secrets_hold_the_same_configuration(sides: list[Side]) -> None:
    for stage in STAGES[:-1]:
        found = {}
        for side in sides:
            secrets = objects_of(side, stage, "Secret")
            assert {s.get("type") for s in secrets} == {"Opaque"}
            assert {tuple(s["data"]) for s in secrets} == {(CONFIG_KEY,)}
            found[side.who] = sorted((config(s, side, stage) for s in secrets), key=repr)
        assert found["main"] == found["ours"], stage
    print("\nthe ExporterConfig of each side's instance, beside the rows' allowance:")
    shown({side.who: found[side.who][0] for side in sides})


def test_status_counters(sides: list[Side]) -> None:
    for stage in STAGES[:-1]:
        counters = {side.who: dict(side.seen[stage]["set"]["status"]) for side in sides}
        for found in counters.values():
            del found["conditions"]
        print(f"\n{stage}:")
        shown(counters)
        assert counters["main"] == counters["ours"], stage


def test_conditions(sides: list[Side]) -> None:
    """The same types, statuses and reasons; each condition's observedGeneration its set's
    generation (main's own update of the set moved it: ROWS["memory"]); the messages are
    each product's words (ROWS["words"]), printed side by side."""
    for stage in STAGES[:-1]:
        found = {}
        print(f"\n{stage}:")
        for side in sides:
            the = side.seen[stage]["set"]
            conditions = the["status"]["conditions"]
            assert {c["observedGeneration"] for c in conditions} == {the["metadata"]["generation"]}
            found[side.who] = {c["type"]: (c["status"], c["reason"]) for c in conditions}
            shown({f"{side.who} {c['type']}": f"{c['status']} {c['reason']}: {c['message']!r}"
                   for c in conditions})  # fmt: skip
        assert found["main"] == found["ours"], stage


def test_event_reasons(sides: list[Side]) -> None:
    """Every reason either writes is the other's too, but for those the table names; the
    set's deletion adds none on either side."""
    reasons = {}
    for side in sides:
        events = side.seen["surplus"]["events"]
        assert side.seen["deleted"]["events"] == events, side.who
        counted = Counter(str(e["reason"]) for e in events)
        reasons[side.who] = counted
        print(f"\n{side.who}: {dict(sorted(counted.items()))}")
        assert {e["involvedObject"]["kind"] for e in events} == {"ExporterSet"}
    only_main = set(reasons["main"]) - set(reasons["ours"])
    only_ours = set(reasons["ours"]) - set(reasons["main"])
    print(f"main's alone: {sorted(only_main)}; ours alone: {sorted(only_ours)}")
    # ROWS["degraded"], ROWS["limited"]: main's transitions while instances boot
    assert only_main <= {SET_DEGRADED, SET_RECOVERED, SCALING_LIMITED, SCALING_UNLIMITED}
    # ROWS["events"] (a wait for credentials); ROWS["available"] (a lease took a warm one)
    assert only_ours <= {WAITING_FOR_CREDENTIALS, SET_UNAVAILABLE}
    # ROWS["pending"]: ours created the refill for the pending Lease, main once it was taken
    notes = [str(e.get("message")) for e in sides[1].seen["surplus"]["events"]]
    print("ours' ScaleUp notes: " + " | ".join(n for n in notes if n.startswith("created Exp")))


def test_a_released_instance(sides: list[Side]) -> None:
    """ROWS["released"]: ours replaced its released instance once the Lease ended; main's
    kept it, its Pod Running, until the exporter's exit was played (its Pod Succeeded):
    then main deleted it (`Recycle`), and both pools were refilled alike."""
    main, ours = sides
    print(f"\nonce the leases ended: main kept {main.leased}: {main.kept_released}; "
          f"ours kept {ours.leased}: {ours.kept_released}")  # fmt: skip
    assert main.kept_released and not ours.kept_released
    for side in sides:
        assert f"Exporter/{side.leased}" not in side.seen["released"]["objects"]


def test_the_election_lease(sides: list[Side]) -> None:
    """`exporter-set-controller-<provisioner>` in the namespace served, its holder named
    `<hostname>_<uuid>` (controller-runtime's), the same duration and fields."""
    found = {side.who: side.seen["deleted"]["election"]["spec"] for side in sides}
    shown(found)
    for spec in found.values():
        host, _, suffix = spec["holderIdentity"].rpartition("_")
        assert host == socket.gethostname() and str(uuid.UUID(suffix)) == suffix, spec
    assert found["main"].keys() == found["ours"].keys()
    assert found["main"]["leaseDurationSeconds"] == found["ours"]["leaseDurationSeconds"]
