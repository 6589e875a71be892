"""Replacing instances against a real kube-apiserver, with Pod phases set by hand as a
kubelet would: a release while the old Pod still terminates never removes the
replacement, and a pool whose every Pod fails backs off instead of storming.

Jumpstarter's released 0.9.0 controller serves each test's namespace: it issues the
credentials, and the exporters that register with it are Jumpstarter 0.9.0's own `jmp
run`, one per live instance Pod (`tests.exporters`). No kubelet runs here, so the tests
play it (`kubectl patch pod --subresource=status`, or `bench.storm.FailingKubelet` for
every new Pod, whose containers then never start) and the garbage collector (a Pod kept
Terminating by a finalizer of the test's; the Secrets of a removed Exporter deleted by the
test or `bench.storm.SecretCollector`). Figures are printed, not asserted as timings; the
bounds only stop a runaway.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.storm import (
    LAST_WORDS,
    CreationCounter,
    FailingKubelet,
    SecretCollector,
    ended_status,
    reconciler,
)
from harness.controlplane import REPO_ROOT, ControlPlane
from pool.model.keys import instance_selector
from pool.rules.stages import standby
from tests.e2e.objects import (
    apply,
    backoff_steps,
    exporter_set,
    find_json,
    get_json,
    one_probe_per_step,
    set_status,
    virtual_target_class,
    wait_for,
)
from tests.exporters import ExporterProcesses

HOLD = "e2e.virtualtarget.jumpstarter.dev/hold"


def make_pool(plane: ControlPlane, ns: str, **spec: Any) -> None:
    apply(plane, virtual_target_class("qemu", ns))
    apply(plane, exporter_set("pool", ns, class_name="qemu", with_template=True, **spec))


def instances(plane: ControlPlane, ns: str) -> list[dict[str, Any]]:
    items = get_json(plane, "exporters", "-n", ns, "-l", instance_selector("pool"))["items"]
    return [e for e in items if not e["metadata"].get("deletionTimestamp")]


def pods_of(plane: ControlPlane, ns: str, uid: str) -> list[dict[str, Any]]:
    return [
        p
        for p in get_json(plane, "pods", "-n", ns)["items"]
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
    ]


def is_registered(plane: ControlPlane, ns: str, exporter: str) -> bool:
    """Jumpstarter's controller shows the exporter Registered (False while it is gone)."""
    found = find_json(plane, "exporter", exporter, "-n", ns)
    if found is None:
        return False
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Registered" and c["status"] == "True" for c in conditions)


def registered(plane: ControlPlane, ns: str, exporter: str) -> None:
    """Wait until the instance's `jmp run` has registered with Jumpstarter's controller."""
    wait_for(f"{exporter} registered", lambda: is_registered(plane, ns, exporter), timeout=60)


def patch(plane: ControlPlane, ns: str, kind: str, name: str, body: Any, *extra: str) -> None:
    plane.kubectl("patch", kind, name, "-n", ns, "--type=merge", "-p", json.dumps(body), *extra)


def end_pod(plane: ControlPlane, ns: str, pod: str, code: int = 0, message: str = "") -> None:
    status = ended_status(code, message)
    patch(plane, ns, "pod", pod, {"status": status}, "--subresource=status")


def condition(plane: ControlPlane, ns: str, kind: str) -> dict[str, Any]:
    status = set_status(plane, ns)
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def one_instance(
    plane: ControlPlane, ns: str, reconcile: Callable[[], Path], **spec: Any
) -> tuple[Path, str, str, dict[str, Any]]:
    """A pool of one instance, reconciled: the log, the Exporter's name and uid, its Pod."""
    make_pool(plane, ns, **{"minReplicas": 1, "maxReplicas": 1, "minAvailableReplicas": 1, **spec})
    log = reconcile()
    (first,) = wait_for("one instance", lambda: instances(plane, ns))
    name, uid = first["metadata"]["name"], first["metadata"]["uid"]
    (pod,) = wait_for("its Pod", lambda: pods_of(plane, ns, uid))
    return log, name, uid, pod


def test_a_release_while_the_old_pod_terminates_never_removes_the_replacement(
    control_plane: ControlPlane,
    ns: str,
    reconcile: Callable[[], Path],
    exporters: ExporterProcesses,
) -> None:
    plane = control_plane
    log, name, uid, old_pod = one_instance(plane, ns, reconcile)
    pod = old_pod["metadata"]["name"]
    patch(plane, ns, "pod", pod, {"metadata": {"finalizers": [HOLD]}})  # stays Terminating
    registered(plane, ns, name)
    time.sleep(1.1)  # the Pod ends a second after the exporter registered
    end_pod(plane, ns, pod)  # finished after serving: recycled (ExitAndReplace)

    def replacement() -> dict[str, Any] | None:
        found = [e for e in instances(plane, ns) if e["metadata"]["uid"] != uid]
        return found[0] if found else None

    new = wait_for("the replacement", replacement)
    new_name, new_uid = new["metadata"]["name"], new["metadata"]["uid"]
    # The garbage collector's part for the config Secret of the removed Exporter.
    for secret in get_json(plane, "secrets", "-n", ns)["items"]:
        if any(r.get("uid") == uid for r in secret["metadata"].get("ownerReferences") or []):
            plane.kubectl("delete", "secret", secret["metadata"]["name"], "-n", ns)
    terminating = wait_for(
        "the old Pod terminating",
        lambda: get_json(plane, "pod", pod, "-n", ns)["metadata"].get("deletionTimestamp"),
    )
    time.sleep(4)  # many passes while the old Pod of that name terminates
    (still,) = instances(plane, ns)
    assert still["metadata"]["uid"] == new_uid, "the replacement was removed"
    assert get_json(plane, "pod", pod, "-n", ns)["metadata"]["deletionTimestamp"] == terminating
    if new_name == name:  # the name came back: its Pod waits for the old one to go
        assert not pods_of(plane, ns, new_uid)
    patch(plane, ns, "pod", pod, {"metadata": {"finalizers": None}})  # the old Pod goes
    (new_pod,) = wait_for("the replacement's Pod", lambda: pods_of(plane, ns, new_uid))
    (after,) = instances(plane, ns)
    assert after["metadata"]["uid"] == new_uid
    text = log.read_text()
    # A remove the standby holds back is logged as a wait, not done.
    lines = text.splitlines()
    removes = [x for x in lines if f": remove {name}" in x and standby.HOLD not in x]
    print(f"\nold Pod {pod} terminated beside {new_name} ({new_uid}); removes logged: {removes}")
    assert len(removes) == 1, text  # the first instance only
    assert "delete pod" not in text, text  # the terminating Pod was deleted once, by Remove
    assert new_pod["metadata"]["ownerReferences"][0]["uid"] == new_uid


def starts_by_step(counter: CreationCounter) -> dict[int, int]:
    """How many instances started at each backoff step (0: before the first failure)."""
    return dict(sorted(Counter(counter.steps.values()).items()))


def failing_pool(
    plane: ControlPlane, ns: str, stop: threading.Event
) -> tuple[FailingKubelet, CreationCounter]:
    """A pool of two slots whose every Pod fails (until `kubelet.failing` is cleared), its
    creations counted and the garbage collector's part for Secrets played, until `stop`."""
    kubelet, counter = FailingKubelet(plane, ns), CreationCounter(plane, ns)
    kubelet.start(stop)
    counter.start(stop)
    SecretCollector(plane, ns).start(stop)
    make_pool(plane, ns, minReplicas=2, maxReplicas=2, minAvailableReplicas=2)
    return kubelet, counter


def test_a_pool_whose_pods_fail_backs_off_says_so_and_fills_once_fixed(
    control_plane: ControlPlane,
    ns: str,
    reconcile: Callable[[], Path],
    exporters: ExporterProcesses,
) -> None:
    plane, window = control_plane, 30.0
    stop = threading.Event()
    exporters.pause()  # the failing kubelet starts no container
    kubelet, counter = failing_pool(plane, ns, stop)
    try:
        started = time.monotonic()
        log = reconcile()
        most_failed = 0  # podsFailed counts the failed Pods present (the backoff's record)
        while time.monotonic() < started + window:
            status = set_status(plane, ns)
            most_failed = max(most_failed, status.get("podsFailed", 0))
            time.sleep(0.5)
        created, starts = counter.since(started), starts_by_step(counter)
        degraded = condition(plane, ns, "Degraded")
        status = get_json(plane, "exporterset", "pool", "-n", ns)["status"]
        events = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
        steps = [e["note"] for e in events if e.get("reason") == "BackOff"]
        print(
            f"\n{created} Exporters created in {window:.0f} s for 2 slots, every Pod failing "
            f"({kubelet.ended} Pods ended); instances started by backoff step {starts}; "
            f"{len(steps)} BackOff Events; "
            f"podsFailed up to {most_failed}; Degraded: {degraded.get('message')}"
        )
        # 2 at first, then one probe per backoff step: no storm, whatever the window held.
        assert starts == one_probe_per_step(2, starts), log.read_text()
        assert (degraded["status"], degraded["reason"]) == ("True", "PodsFailing")
        assert LAST_WORDS in degraded["message"]
        assert most_failed > 0
        assert steps and len(steps) == len(set(steps)) <= created  # one per step

        # Fixed (the endpoint reachable, say): the next probe's exporter starts and
        # registers, the pool fills.
        kubelet.failing.clear()
        exporters.resume()

        def registered_probe() -> str:
            return next(
                (
                    str(e["metadata"]["name"])
                    for e in instances(plane, ns)
                    if is_registered(plane, ns, e["metadata"]["name"])
                ),
                "",
            )

        probe = wait_for("a probe instance registered", registered_probe, timeout=120)
        fixed_at = time.monotonic()
        wait_for(
            "the pool full",
            lambda: len(instances(plane, ns)) == 2
            and all(pods_of(plane, ns, e["metadata"]["uid"]) for e in instances(plane, ns)),
        )
        print(f"pool full {time.monotonic() - fixed_at:.1f} s after {probe} registered")
        wait_for(
            "Degraded False", lambda: condition(plane, ns, "Degraded").get("status") == "False"
        )
    finally:
        stop.set()


def test_a_pool_of_one_slot_whose_pods_fail_backs_off_at_its_ceiling(
    control_plane: ControlPlane, ns: str, tmp_path: Path
) -> None:
    """minReplicas = maxReplicas = 1: the failed instance holds the only slot until its
    delay is over, so each probe comes a pass after the removal. Its Pods end Succeeded
    with no container status. The reconciler is restarted half-way: the backoff is the
    pool's memory (here its Lease), not the process's."""
    plane, window = control_plane, 60.0
    stop = threading.Event()
    kubelet = FailingKubelet(plane, ns, container_status=False)
    counter = CreationCounter(plane, ns)
    kubelet.start(stop)
    counter.start(stop)
    SecretCollector(plane, ns).start(stop)
    make_pool(plane, ns, minReplicas=1, maxReplicas=1, minAvailableReplicas=1)
    degraded: list[str] = []  # Degraded's status at each look, from its first True on
    try:
        started = time.monotonic()
        for half in range(2):  # a restart half-way
            with reconciler(plane, REPO_ROOT, ns, tmp_path / f"reconciler-{half}.log"):
                while time.monotonic() < started + window * (half + 1) / 2:
                    state = condition(plane, ns, "Degraded").get("status", "")
                    if degraded or state == "True":
                        degraded.append(state)
                    time.sleep(0.5)
        created, starts = counter.since(started - 1), starts_by_step(counter)
        status = get_json(plane, "exporterset", "pool", "-n", ns)["status"]
    finally:
        stop.set()
    events = get_json(plane, "events.events.k8s.io", "-n", ns)["items"]
    reasons = Counter(str(e.get("reason")) for e in events)
    steps = backoff_steps(events)
    final = condition(plane, ns, "Degraded")
    logs = "\n".join(p.read_text() for p in sorted(tmp_path.glob("reconciler-*.log")))
    print(
        f"\nmaxReplicas 1, every Pod failing (phase only), a restart at 30 s: {created} "
        f"Exporters in {window:.0f} s ({kubelet.ended} Pods ended), instances started by "
        f"backoff step {starts}; {len(events)} Events "
        f"{dict(sorted(reasons.items()))}; BackOff steps {steps}; podsFailed "
        f"{status.get('podsFailed')}; Degraded: {final.get('message')}"
    )
    # The restart starts no count again: one probe per step, the first instance alone at 0.
    assert starts == one_probe_per_step(1, starts), logs
    assert degraded and set(degraded) == {"True"}, (degraded, logs)
    assert (final["status"], final["reason"]) == ("True", "PodsFailing")
    assert "failure" in final["message"] and "exited" in final["message"]
    assert steps and len(steps) == len(set(steps)), logs  # at most one Event per step
    assert steps == list(range(1, len(steps) + 1)), steps  # never back to 1
    assert not reasons["ExporterSetRecovered"], logs
    assert not reasons["ScalingLimited"] and not reasons["ScalingUnlimited"], logs
