"""Pools whose instance Pods really run, on the single-node cluster.

Every instance runs the QEMU exporter image this project ships (`images/qemu-exporter`:
Jumpstarter's release `jmp run` and drivers, with QEMU), named by the pools' class, in the
default layout (QEMU in the exporter's container). Each pool's namespace is served by
Jumpstarter's released 0.9.0 controller and router on the node IP: the controller issues
the credentials, each exporter registers with it from inside its Pod, and the Leases are
the release client's (`jmp create lease`, `jmp delete lease`), assigned and ended by that
controller. In the guest test the client also flashes the marker guest
(`harness/guest.py`), boots it under TCG and releases it; failures are real process exits
on the node.

Every test prints its figure; the waits are bounded polls, never timing assertions.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harness.guest import MARKER
from harness.jumpstarter import JumpstarterSupply
from pool.model.jumpstarter import CONFIG_KEY, QEMU_DRIVER, TOKEN_KEY
from pool.model.keys import SERVED_LEASE
from tests.e2e.objects import backoff_steps, get_json, instance_step, one_probe_per_step
from tests.exporters import DRIVER_NAMES, reported_drivers
from tests.exporters import DRIVERS as DRIVERS_OK
from tests.node.guest_support import monotonic, run_client
from tests.node.pool_support import (
    Pool,
    fresh_pool,
    kill_container,
    running_pool,
)
from tests.node.support import record_figure

# The first test's setup builds the QEMU exporter image on a fresh clone (about 3 minutes
# on 2 cores) and starts the cluster, past the suite's default 300 s per test.
pytestmark = pytest.mark.timeout(900)
# Its kubelet and containerd restart test: last of the first worker's modules on the
# shared cluster (tests/node/support.py).
RESTARTS_NODE = True

Obj = dict[str, Any]


# -- fixtures ---------------------------------------------------------------------------


# A template whose driver cannot start: its package is not in the exporter image.
BROKEN_DRIVERS = [{"name": "shell", "type": "jumpstarter_driver_shell.driver.Shell"}]
BROKEN_WINDOW_S = 120.0  # how long the broken pools are watched before they are fixed
WARM = 2
# The broken pools' shapes, by their slots: room under the ceiling (a warm buffer, no
# maxReplicas), and at the ceiling (min = max = 1: the failed instance holds the only slot
# until its delay is over, so each probe follows its removal a pass later).
BROKEN_SHAPES = {
    WARM: {"minAvailableReplicas": WARM},
    1: {"minReplicas": 1, "maxReplicas": 1, "minAvailableReplicas": 1},
}
_FIXED_AT: dict[str, float] = {}  # a broken pool's namespace -> when it was fixed


@pytest.fixture(scope="module")
def broken_pools(
    node_cluster: Any,
    jumpstarters: JumpstarterSupply,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[int, Pool]]:
    """Pools whose exporters can never start (by their slots, `BROKEN_SHAPES`), applied
    with the first pool test and left running beside the others: their two-minute window
    costs the tier no time of its own. Checked (and fixed) by the broken-pool tests,
    which come before the node restarts."""
    with contextlib.ExitStack() as stack:
        pools = {}
        for slots, shape in BROKEN_SHAPES.items():
            jumpstarter = stack.enter_context(jumpstarters.take())
            stack.callback(
                node_cluster.kubectl,
                "delete",
                "namespace",
                jumpstarter.namespace,
                "--wait=false",
                check=False,
            )
            workdir = tmp_path_factory.mktemp("broken")
            pool = stack.enter_context(
                running_pool(node_cluster, jumpstarter, workdir, name="broken")
            )
            pool.apply(drivers=BROKEN_DRIVERS, **shape)
            pools[slots] = pool
        yield pools


@pytest.fixture
def pool(
    node_cluster: Any,
    jumpstarters: JumpstarterSupply,
    broken_pools: dict[int, Pool],
    tmp_path: Path,
) -> Iterator[Pool]:
    with fresh_pool(node_cluster, jumpstarters, tmp_path) as running:
        yield running


# -- helpers ----------------------------------------------------------------------------


def _uid(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])


def _owner_uid(obj: Obj) -> str:
    refs = obj["metadata"].get("ownerReferences") or []
    return next((str(r["uid"]) for r in refs if r.get("controller")), "")


def _by_name(objects: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects}


def _owned_secrets(pool: Pool, exporter_uid: str) -> dict[str, Obj]:
    return {n: s for n, s in pool.secrets().items() if _owner_uid(s) == exporter_uid}


def assert_tidy(pool: Pool, instances: int) -> None:
    """No duplicates and no orphans: `instances` Exporters, each with exactly one live Pod
    and its two Secrets, and nothing in the namespace owned by an Exporter that is gone."""
    exporters = {_uid(e): e for e in pool.exporters()}
    assert len(exporters) == instances, sorted(e["metadata"]["name"] for e in exporters.values())
    live_pods = [p for p in pool.pods() if not p["metadata"].get("deletionTimestamp")]
    owners = [_owner_uid(p) for p in live_pods]
    assert sorted(owners) == sorted(exporters), f"Pods owned by {owners}, Exporters {exporters}"
    for secret in pool.secrets().values():
        refs = secret["metadata"].get("ownerReferences") or []
        if any(r["kind"] == "Exporter" for r in refs):
            assert _owner_uid(secret) in exporters, f"orphan Secret {secret['metadata']['name']}"
    for uid, exporter in exporters.items():
        name = exporter["metadata"]["name"]
        assert set(_owned_secrets(pool, uid)) == set(pool.instance_secrets(name))


def _running_pod_of(pool: Pool, exporter_uid: str) -> Obj | None:
    return next((p for p in pool.running() if _owner_uid(p) == exporter_uid), None)


def _secret_text(pool: Pool, name: str, key: str) -> str:
    return base64.b64decode(pool.secrets()[name]["data"][key]).decode()


def _new_exporters(pool: Pool, before: set[str]) -> list[Obj]:
    return [e for e in pool.exporters() if _uid(e) not in before]


# -- a pool that fills, in a namespace enforcing the instance Pods' Pod Security level ---


def test_the_pool_fills_and_every_exporter_registers_from_inside_its_pod(pool: Pool) -> None:
    pool.apply(minAvailableReplicas=2)
    pool.wait_warm(2)
    print(
        f"\nset created -> warm buffer of 2 full (podsRunning, readyReplicas, "
        f"availableReplicas): {time.monotonic() - pool.created_at:.1f} s\n{pool.table()}"
    )
    exporters = _by_name(pool.exporters())
    assert pool.registered() == set(exporters)
    for name, exporter in exporters.items():
        status = exporter["status"]
        conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert conditions["Registered"] == ("True", "Register")
        assert conditions["Online"][0] == "True"
        # What the exporter reported from inside its Pod: the template's drivers.
        assert reported_drivers(status["devices"]) == DRIVER_NAMES, status["devices"]
        # With the credential Jumpstarter's controller issued to it, the config carries.
        config, credential = pool.instance_secrets(name)
        assert _secret_text(pool, credential, TOKEN_KEY) in _secret_text(pool, config, CONFIG_KEY)
    assert_tidy(pool, 2)


# -- a real client leases an instance, boots a guest on it; its successor comes Online ----

# The template of Jumpstarter's own QEMU pools: one QEMU driver; its size from the class.
GUEST_DRIVERS = [{"name": "qemu", "type": QEMU_DRIVER, "config": {"hostname": "guest"}}]
# The guest: one vCPU, 256 MiB (the class's parameters); the Pod requests them.
GUEST_PARAMETERS = {"resources": {"cpu": 1, "memory": "256Mi"}}
GUEST_REQUESTS = {"cpu": "1", "memory": "512Mi"}  # the guest's memory and QEMU's, jmp's
BOOTS = 2  # per lease: power on to the marker, off, on to the marker again


@pytest.fixture
def guest_pool(
    node_cluster: Any,
    jumpstarters: JumpstarterSupply,
    broken_pools: dict[int, Pool],
    tmp_path: Path,
) -> Iterator[Pool]:
    """A pool of one QEMU instance."""
    with fresh_pool(
        node_cluster, jumpstarters, tmp_path, name="guest", parameters=GUEST_PARAMETERS
    ) as running:
        yield running


def _online_since(pool: Pool, uid: str) -> float | None:
    """When the watch first showed the Exporter `uid` Online (time.monotonic())."""
    for event in list(pool.history.exporters):
        conditions = (event.obj.get("status") or {}).get("conditions") or []
        if event.uid == uid and any(
            c["type"] == "Online" and c["status"] == "True" for c in conditions
        ):
            return event.at
    return None


def _has_kvm(pool: Pool, pod: str) -> str:
    check = "import os; print(os.path.exists('/dev/kvm'))"
    done = pool.cluster.kubectl(
        "exec", "-n", pool.namespace, pod, "-c", "exporter", "--", "python3", "-c", check
    )
    return done.stdout.strip()


def test_a_client_leases_an_instance_boots_a_guest_and_its_successor_comes_online(
    guest_pool: Pool, marker_guest: Path, tmp_path: Path
) -> None:
    """Jumpstarter's e2e on the released exporter: a real 0.9.0 client leases the pool's
    instance by its labels, flashes the marker guest, powers it on and reads the console
    to the marker, power-cycles and reads it again, and releases; under ExitAndReplace
    the released instance is replaced and its successor comes Online (a new instance
    like the first, whose boot would take the path this one took)."""
    pool = guest_pool
    pool.apply(drivers=GUEST_DRIVERS, minAvailableReplicas=1, maxReplicas=1)
    pool.wait_warm(1, timeout=180)
    config = pool.jumpstarter.client_config("tester")
    (instance,) = pool.exporters()  # the pool's ceiling is one instance
    name, uid = instance["metadata"]["name"], _uid(instance)
    pod = get_json(pool.cluster, "pod", name, "-n", pool.namespace)
    (container,) = pod["spec"]["containers"]  # QEMU runs in the exporter's container
    disk = {"ephemeral-storage": "11Gi"}  # the default guest disk's emptyDir (10Gi, 10%)
    assert container["resources"] == {"requests": GUEST_REQUESTS | disk, "limits": disk}
    # TCG: the Pod is given no /dev/kvm (here it is a PVM device, which freezes a guest).
    assert _has_kvm(pool, name) == "False"
    run = run_client(config, "pool=guest", marker_guest, BOOTS, tmp_path)
    assert run.code == 0, f"{run.output}\n{pool.instance_logs()}"
    acquired = run.first("lease acquired")
    assert acquired["exporter"] == name, run.output
    markers = [e["line"] for e in run.events if e["event"] == "marker"]
    assert len(markers) == BOOTS and all(m.startswith(MARKER) for m in markers), run.output
    found = pool.cluster.kubectl("get", "leases.jumpstarter.dev", acquired["lease"],
                                 "-n", pool.namespace, "-o", "json", check=False)  # fmt: skip
    if found.returncode == 0:  # else gone with its recycled Exporter, which owns it
        lease = json.loads(found.stdout)
        assert lease["status"]["ended"] is True, lease["status"]  # ended by the controller
        assert lease["status"]["exporterRef"]["name"] == name

    def successor() -> Obj | None:
        exporters = pool.exporters()
        found = [e for e in exporters if _uid(e) != uid]
        gone = len(found) == len(exporters)
        return found[0] if found and gone and _online_since(pool, _uid(found[0])) else None

    new = pool.wait("the successor Online", successor, timeout=180)
    online = _online_since(pool, _uid(new))
    assert online is not None
    assert _uid(new) not in pool.history.deleted(pool.history.exporters)
    flash = run.at("flashed") - run.at("flash started")
    ready = pool.lease_ready_s(acquired["lease"])
    record_figure(
        f"guest ({name}): Lease created -> Ready {ready:.0f} s; lease request -> "
        f"client holding it "
        f"{run.at('lease acquired') - run.at('lease requested'):.2f} s; flash "
        f"{marker_guest.stat().st_size >> 20} MiB {flash:.1f} s;"
        f" power-on -> marker {run.boot_times()}; release -> successor Online "
        f"{online - monotonic(run.at('releasing')):.1f} s"
    )
    pool.wait_warm(1, timeout=180)
    assert_tidy(pool, 1)


# -- lifecycle ---------------------------------------------------------------------------


def _lease(pool: Pool, exporter: str, lease: str) -> None:
    """A Lease pinned to `exporter`, assigned by Jumpstarter's controller, and the instance
    marked by the reconciler as having served it."""
    assert pool.lease(lease, exporter=exporter) == exporter
    pool.wait(
        f"{exporter} marked as having served {lease}",
        lambda: get_json(pool.cluster, "exporter", exporter, "-n", pool.namespace)["metadata"]
        .get("annotations", {})
        .get(SERVED_LEASE)
        == lease,
    )


def test_exit_and_replace_with_real_termination(pool: Pool) -> None:
    pool.apply(minReplicas=2, minAvailableReplicas=1)
    pool.wait_warm(2)
    before = _by_name(pool.exporters())
    old_name = sorted(before)[0]
    old = before[old_name]
    old_secrets = _owned_secrets(pool, _uid(old))
    assert set(old_secrets) == set(pool.instance_secrets(old_name))
    _lease(pool, old_name, "lease-1")
    released = pool.release("lease-1")

    def replacement() -> Obj | None:
        new = _new_exporters(pool, {_uid(e) for e in before.values()})
        return new[0] if new and _running_pod_of(pool, _uid(new[0])) else None

    new = pool.wait("the replacement's Pod Running", replacement, timeout=120)
    running_after = time.monotonic() - released
    old_pod_left = any(_owner_uid(p) == _uid(old) for p in pool.pods())
    print(
        f"\nrelease -> replacement {new['metadata']['name']} Pod Running: {running_after:.1f} s"
        f" (the old Pod {'still terminating' if old_pod_left else 'already gone'} then)"
    )
    # The garbage collector removes the old instance's config and credential Secrets...
    pool.wait("the old instance's Secrets gone", lambda: not _owned_secrets(pool, _uid(old)))
    pool.wait("the old Pod gone", lambda: not any(_owner_uid(p) == _uid(old) for p in pool.pods()))
    pool.wait_warm(2)
    # ...and none of the new one's; the replacement was never removed, and it is the only
    # Exporter created since the release.
    new_name = new["metadata"]["name"]
    assert set(_owned_secrets(pool, _uid(new))) == set(pool.instance_secrets(new_name))
    created = pool.history.created(pool.history.exporters, after=released)
    assert list(created) == [_uid(new)], [e.name for e in created.values()]
    assert _uid(new) not in pool.history.deleted(pool.history.exporters)
    assert_tidy(pool, 2)


HOLD = "tests.virtualtarget.jumpstarter.dev/hold"  # a finalizer only the test removes


def _set_finalizers(pool: Pool, pod: str, finalizers: list[str] | None) -> None:
    body = json.dumps({"metadata": {"finalizers": finalizers}})
    pool.cluster.kubectl("patch", "pod", pod, "-n", pool.namespace, "--type=merge", "-p", body)


def test_a_release_while_the_old_pod_terminates_never_removes_the_replacement(
    pool: Pool,
) -> None:
    """The old Pod is held in Terminating by a finalizer while its instance is replaced,
    so the replacement certainly lives beside a predecessor's Pod that has finished."""
    pool.apply(minReplicas=2, minAvailableReplicas=1)
    pool.wait_warm(2)
    before = _by_name(pool.exporters())
    old_name = sorted(before)[0]
    old_uid = _uid(before[old_name])
    old_pod = next(p for p in pool.pods() if _owner_uid(p) == old_uid)
    _set_finalizers(pool, old_pod["metadata"]["name"], [HOLD])
    try:
        _lease(pool, old_name, "lease-1")
        released = pool.release("lease-1")

        def replacement() -> Obj | None:
            new = _new_exporters(pool, set(map(_uid, before.values())))
            return new[0] if new and _running_pod_of(pool, _uid(new[0])) else None

        new = pool.wait("the replacement's Pod Running", replacement, timeout=120)
        print(f"\nrelease -> replacement Pod Running: {time.monotonic() - released:.1f} s")

        def old_pod_deleting() -> Obj | None:  # its Exporter goes once its fence settled
            held = get_json(pool.cluster, "pod", old_pod["metadata"]["name"], "-n", pool.namespace)
            return held if held["metadata"].get("deletionTimestamp") else None

        held = pool.wait("the old Pod being deleted", old_pod_deleting, timeout=60)
        assert held["metadata"]["uid"] == _uid(old_pod)
        # A few passes with the finished old Pod still there (its phase is settled).
        pool.wait(
            "the old Pod's containers stopped",
            lambda: get_json(
                pool.cluster, "pod", old_pod["metadata"]["name"], "-n", pool.namespace
            )["status"].get("phase")
            in ("Succeeded", "Failed"),
        )
        time.sleep(3)
    finally:
        _set_finalizers(pool, old_pod["metadata"]["name"], None)
    pool.wait("the old Pod gone", lambda: not any(_uid(p) == _uid(old_pod) for p in pool.pods()))
    pool.wait_warm(2)
    assert _uid(new) not in pool.history.deleted(pool.history.exporters)
    created = pool.history.created(pool.history.exporters, after=released)
    assert list(created) == [_uid(new)], [e.name for e in created.values()]
    assert_tidy(pool, 2)


def test_scale_down_after_the_cooldown_removes_only_the_surplus(pool: Pool) -> None:
    pool.apply(minReplicas=3, scaleDownCooldown="5s")
    pool.wait_warm(3)
    exporters = {_uid(e): e for e in pool.exporters()}
    pods = {_owner_uid(p): p for p in pool.pods()}
    owned = {uid: _owned_secrets(pool, uid) for uid in exporters}
    changed = time.monotonic()
    pool.patch_set({"spec": {"minReplicas": 1}})
    pool.wait("one instance left", lambda: len(pool.exporters()) == 1, timeout=60)
    (kept,) = pool.exporters()
    removed = set(exporters) - {_uid(kept)}
    pool.wait(
        "the removed instances' Pods and Secrets gone",
        lambda: not any(_owner_uid(p) in removed for p in pool.pods())
        and not any(_owned_secrets(pool, uid) for uid in removed),
        timeout=60,
    )
    gone = time.monotonic() - changed
    deletions = pool.history.deleted(pool.history.exporters)
    first_removal = min(deletions[uid].at for uid in removed) - changed
    print(
        f"\nminReplicas 3 -> 1, cooldown 5s: first instance removed after {first_removal:.1f} s,"
        f" their Pods and Secrets gone after {gone:.1f} s"
    )
    assert first_removal >= 4.0, "an instance went before the cooldown had passed"
    # Nothing of the remaining instance was touched.
    kept_uid = _uid(kept)
    pod = next(p for p in pool.pods() if _owner_uid(p) == kept_uid)
    assert _uid(pod) == _uid(pods[kept_uid]) and not pod["metadata"].get("deletionTimestamp")
    now = _owned_secrets(pool, kept_uid)
    assert {n: s["metadata"]["resourceVersion"] for n, s in now.items()} == {
        n: s["metadata"]["resourceVersion"] for n, s in owned[kept_uid].items()
    }
    pool.wait_warm(1)
    assert_tidy(pool, 1)


# -- a broken pool, watched beside the tests above (fixed here, checked further down) ----


def _starts_by_step(pool: Pool) -> dict[int, int]:
    """How many of the pool's instances started at each backoff step (0: before the first
    failure), each as the watch first saw it an instance (a standby once promoted)."""
    steps: dict[str, int] = {}
    for event in list(pool.history.exporters):
        if (step := instance_step(event.obj)) is not None:
            steps.setdefault(event.uid, step)
    return dict(sorted(Counter(steps.values()).items()))


def _failed_counter(pool: Pool) -> Callable[[], bool]:
    return lambda: int(pool.status().get("podsFailed", 0)) > 0


def test_a_broken_pool_stays_bounded_and_says_it_is_degraded(
    broken_pools: dict[int, Pool],
) -> None:
    assert broken_pools.keys() == BROKEN_SHAPES.keys()
    first = min(pool.created_at for pool in broken_pools.values())
    remaining = BROKEN_WINDOW_S - (time.monotonic() - first)
    if remaining > 0:  # only when the tests before were quicker than the window
        time.sleep(remaining)
    for slots, pool in broken_pools.items():
        window = time.monotonic() - pool.created_at
        created = pool.history.created(pool.history.exporters)
        starts = _starts_by_step(pool)
        status = pool.status()
        degraded = pool.condition("Degraded")
        events = [  # the set's (the kubelet's about Pods are many more)
            e
            for e in get_json(pool.cluster, "events", "-n", pool.namespace)["items"]
            if e["involvedObject"].get("kind") == "ExporterSet"
        ]
        reasons = [str(e.get("reason")) for e in events]
        steps = backoff_steps(events)
        print(
            f"\nbroken pool (driver not installed), {BROKEN_SHAPES[slots]}: {len(created)} "
            f"Exporters created in {window:.0f} s, started by backoff step {starts}; "
            f"{len(events)} Events of the "
            f"set {dict(Counter(reasons))}; BackOff steps {steps}; "
            f"podsFailed {status.get('podsFailed')}; "
            f"Degraded={degraded.get('status')}/{degraded.get('reason')}: "
            f"{degraded.get('message')}\n{pool.table()}"
        )
        # Its slots, then one probe per failure in a row: no storm, whatever the window.
        assert starts == one_probe_per_step(slots, starts), starts
        assert degraded.get("status") == "True"
        assert "ExporterSetRecovered" not in reasons, reasons  # Degraded never left True
        assert steps == list(range(1, len(steps) + 1)), steps  # one Event per step
        assert not pool.registered(), "an exporter without its driver registered"
    for pool in broken_pools.values():
        # A failed Pod is counted while it is kept through its backoff delay; between a
        # removal and the next failure none is present, so the count is waited for.
        pool.wait("status.podsFailed to count a failed Pod", _failed_counter(pool), timeout=90)
    for pool in broken_pools.values():  # the repair: a template whose drivers start
        pool.patch_set({"spec": {"template": {"spec": {"drivers": DRIVERS_OK}}}})
        _FIXED_AT[pool.namespace] = time.monotonic()


@pytest.mark.parametrize("recycle", ["ExitAndReplace", "InPlaceReuse"])
def test_a_pod_that_fails_is_replaced_under_the_backoff(pool: Pool, recycle: str) -> None:
    """The exporter process is killed (SIGKILL, as the OOM killer would): the Pod fails
    (exit 137). A failed instance is replaced, whatever the recycle strategy (InPlaceReuse
    reuses instances that served a lease, not ones that failed): after the pool's backoff
    the failed Exporter goes and a new one takes its place."""
    pool.apply(minAvailableReplicas=1, recycleStrategy=recycle)
    pool.wait_warm(1)
    (exporter,) = pool.exporters()
    (pod,) = pool.running()
    killed = time.monotonic()
    kill_container(pod, "exporter", signal.SIGKILL)
    failed_seen: list[Obj] = []

    def back() -> Obj | None:
        status = pool.status()
        if status.get("podsFailed"):
            failed_seen.append(status)
        fresh = [p for p in pool.running() if _owner_uid(p) != _uid(exporter)]
        return fresh[0] if fresh and pool.warm(1) else None

    pool.wait("a new instance Running and the warm buffer full", back, timeout=120)
    print(
        f"\n{recycle}: exporter killed -> new instance's Pod Running: "
        f"{time.monotonic() - killed:.1f} s"
    )
    phases = [e.obj["status"].get("phase") for e in pool.history.pods if e.uid == _uid(pod)]
    assert "Failed" in phases, phases
    assert failed_seen, "status.podsFailed never counted the failed Pod"
    assert _uid(exporter) in pool.history.deleted(pool.history.exporters)
    assert_tidy(pool, 1)


def test_a_pod_deleted_by_hand_comes_back_and_the_counts_follow(pool: Pool) -> None:
    pool.apply(minAvailableReplicas=1)
    pool.wait_warm(1)
    (exporter,) = pool.exporters()
    (pod,) = pool.pods()
    seen: list[tuple[int, int, int, int]] = []
    deleted = time.monotonic()
    pool.cluster.kubectl("delete", "pod", pod["metadata"]["name"], "-n", pool.namespace)

    def back() -> bool:
        status = pool.status()
        counts = tuple(
            status.get(k, 0) for k in ("podsPending", "podsRunning", "podsFailed", "podsUnknown")
        )
        if not seen or seen[-1] != counts:
            seen.append(counts)  # type: ignore[arg-type]
        fresh = [p for p in pool.running() if _uid(p) != _uid(pod)]
        return bool(fresh) and pool.warm(1)

    pool.wait("the instance's Pod back, Running", back, timeout=120)
    print(
        f"\nPod deleted -> a new Pod Running: {time.monotonic() - deleted:.1f} s;"
        f" (pending, running, failed, unknown) passed through: {seen}"
    )
    (after,) = pool.exporters()
    assert _uid(after) == _uid(exporter), (
        f"the instance keeps its Exporter; the deleted Pod passed through\n"
        f"{pool.history.timeline(_uid(pod))}\n{pool.describe()}"
    )
    # One Pod at most at any moment: the counts never add up to more than one.
    assert all(sum(counts) <= 1 for counts in seen), seen
    assert seen[-1] == (0, 1, 0, 0)
    assert_tidy(pool, 1)


# -- node restarts, then the broken pool once fixed (nothing else after the restarts) ----


def _node_lease_renewed_after(cluster: Any, moment: datetime) -> bool:
    """The kubelet renewed its node Lease after `moment`: it is back and talking."""
    lease = get_json(cluster, "lease", "-n", "kube-node-lease", cluster.node_name)
    renewed = datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
    return renewed > moment


def test_kubelet_then_containerd_restart_returns_to_the_warm_buffer(
    node_alone: None, pool: Pool, node_cluster: Any
) -> None:
    pool.apply(minAvailableReplicas=WARM)
    pool.wait_warm(WARM)
    for component in ("kubelet", "containerd"):
        pods_before = {_uid(p) for p in pool.running()}
        restarted, started = datetime.now(UTC), time.monotonic()
        # Stopped as a service manager stops it (SIGTERM), then started with the same
        # arguments and state; the containers and their shims run on meanwhile.
        node_cluster.plane.kill(component, signal.SIGTERM)
        node_cluster.plane.restart(component)
        pool.wait(
            f"the kubelet talking to the apiserver after the {component} restart",
            lambda at=restarted: _node_lease_renewed_after(node_cluster, at),
        )
        pool.wait(
            "the node Ready",
            lambda: any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in get_json(node_cluster, "node", node_cluster.node_name)["status"][
                    "conditions"
                ]
            ),
        )
        pool.wait_warm(WARM, timeout=180)
        kept = pods_before & {_uid(p) for p in pool.running()}
        print(
            f"\n{component} restart: warm buffer of {WARM} full again "
            f"{time.monotonic() - started:.1f} s after the stop; Pods kept {len(kept)} of "
            f"{len(pods_before)}\n{pool.table()}"
        )
        assert_tidy(pool, WARM)


def test_the_broken_pool_once_fixed_fills_its_warm_buffer(
    broken_pools: dict[int, Pool],
) -> None:
    assert broken_pools.keys() == BROKEN_SHAPES.keys()
    for slots, pool in broken_pools.items():
        fixed_at = _FIXED_AT.get(pool.namespace)
        assert fixed_at is not None, "the broken pool was not fixed (see the test before)"
        pool.wait_warm(slots, timeout=300)
        degraded = pool.condition("Degraded")
        print(
            f"\nbroken pool {BROKEN_SHAPES[slots]} fixed -> warm buffer of {slots} full: "
            f"{time.monotonic() - fixed_at:.1f} s after the fix; "
            f"Degraded={degraded.get('status')}/{degraded.get('reason')}"
        )
        assert degraded.get("status") == "False"
        assert_tidy(pool, slots)
