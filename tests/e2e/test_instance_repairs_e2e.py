"""Instances against a real kube-apiserver where the world changes under the pool: a Pod
deleted by hand, an instance Pod left by an earlier version of this product (only the
old set label), a broken pool fixed in the middle of its backoff.

Jumpstarter's released 0.9.0 controller serves each test's namespace (credentials,
registration), and each live instance Pod's exporter is Jumpstarter 0.9.0's own `jmp run`
(`tests.exporters`). No kubelet runs here: the tests play it (`kubectl patch pod
--subresource=status`, `bench.storm.FailingKubelet`, under which no container starts) and
the garbage collector (a finalizer of the test's keeps a deleted Pod Terminating). Figures
are printed, not asserted as timings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.controlplane import ControlPlane
from pool.model.keys import BACKOFF_STEP, NAME_LABEL, REVISION, SET_LABEL
from tests.e2e.objects import get_json, wait_for
from tests.e2e.test_replacement_e2e import (
    HOLD,
    condition,
    end_pod,
    failing_pool,
    instances,
    one_instance,
    patch,
    pods_of,
    registered,
)
from tests.exporters import ExporterProcesses


def test_a_pod_deleted_by_hand_gives_the_instance_a_new_pod_not_a_new_exporter(
    control_plane: ControlPlane,
    ns: str,
    reconcile: Callable[[], Path],
    exporters: ExporterProcesses,
) -> None:
    plane = control_plane
    log, name, uid, old = one_instance(plane, ns, reconcile, maxReplicas=2)
    pod, pod_uid = old["metadata"]["name"], old["metadata"]["uid"]
    registered(plane, ns, name)
    wait_for("available", lambda: condition(plane, ns, "Available").get("status") == "True")
    patch(plane, ns, "pod", pod, {"metadata": {"finalizers": [HOLD]}})  # stays Terminating
    deleted = time.monotonic()
    plane.kubectl("delete", "pod", pod, "-n", ns, "--wait=false")
    end_pod(plane, ns, pod)  # SIGTERM (its jmp run stopped): exit 0, the Pod Succeeded
    time.sleep(4)  # many passes while the deleted Pod terminates
    (still,) = instances(plane, ns)
    assert still["metadata"]["uid"] == uid, log.read_text()  # no new Exporter
    status = get_json(plane, "exporterset", "pool", "-n", ns)["status"]
    assert status.get("availableReplicas", 0) == 0, status  # not available meanwhile
    assert [p["metadata"]["uid"] for p in pods_of(plane, ns, uid)] == [pod_uid]
    patch(plane, ns, "pod", pod, {"metadata": {"finalizers": None}})  # the old Pod goes
    (new,) = wait_for(
        "a new Pod for the same Exporter",
        lambda: [p for p in pods_of(plane, ns, uid) if p["metadata"]["uid"] != pod_uid],
    )
    print(f"\nPod deleted by hand -> a new Pod of {name}: {time.monotonic() - deleted:.1f} s")
    assert new["metadata"]["ownerReferences"][0]["uid"] == uid
    (after,) = instances(plane, ns)
    assert after["metadata"]["uid"] == uid
    text = log.read_text()
    assert f": remove {name}" not in text, text


def test_an_instance_pod_of_an_earlier_version_gets_the_label_the_pool_selects_by(
    control_plane: ControlPlane, ns: str, reconcile: Callable[[], Path]
) -> None:
    plane = control_plane
    log, _, uid, pod = one_instance(plane, ns, reconcile)
    name, pod_uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    # As an earlier version labelled it: only the set label, none the Pod cache selects by.
    plane.kubectl("label", "pod", name, "-n", ns, f"{NAME_LABEL}-", f"{SET_LABEL}=pool")
    relabelled = time.monotonic()

    def adopted() -> bool:
        labels = get_json(plane, "pod", name, "-n", ns)["metadata"].get("labels") or {}
        return labels.get(NAME_LABEL) == "pool"

    wait_for("the Pod labelled for the pool again", adopted)
    print(f"\nearlier version's Pod labelled {time.monotonic() - relabelled:.1f} s after")
    time.sleep(3)  # many passes: nothing more is asked for
    (same,) = pods_of(plane, ns, uid)
    assert same["metadata"]["uid"] == pod_uid  # the same Pod, not deleted or made again
    status = get_json(plane, "exporterset", "pool", "-n", ns)["status"]
    assert status.get("podsPending", 0) == 1, status  # the pool's count sees it
    text = log.read_text()
    assert text.count("added the labels") == 1, text


def test_a_fix_in_the_middle_of_the_backoff_fills_the_pool_at_once(
    control_plane: ControlPlane,
    ns: str,
    reconcile: Callable[[], Path],
    exporters: ExporterProcesses,
) -> None:
    plane = control_plane
    stop = threading.Event()
    exporters.pause()  # the failing kubelet starts no container
    kubelet, counter = failing_pool(plane, ns, stop)
    try:
        log = reconcile()

        def stepped() -> bool:
            return any(int(e["metadata"].get("annotations", {}).get(BACKOFF_STEP, 0)) >= 2
                       for e in instances(plane, ns))  # fmt: skip

        wait_for("a probe after two failures in a row", stepped, timeout=120)
        # The failing revision: a probe of it may still be created while the patch goes in.
        failing = {e["metadata"].get("annotations", {}).get(REVISION) for e in instances(plane, ns)}
        # The repair: a template whose drivers start (the set's spec changes).
        kubelet.failing.clear()
        exporters.resume()
        drivers = [{"name": "power", "type": "jumpstarter_driver_power.driver.MockPower"}]
        patch(
            plane, ns, "exporterset", "pool", {"spec": {"template": {"spec": {"drivers": drivers}}}}
        )
        fixed, created = time.monotonic(), counter.since(0)

        def fresh() -> list[dict[str, object]]:
            return [
                e
                for e in instances(plane, ns)
                if e["metadata"].get("annotations", {}).get(REVISION) not in failing
            ]

        # Both slots at once, as a healthy pool's: no probe, no wait for a delay.
        new = wait_for("the pool filled afresh", lambda: len(fresh()) == 2 and fresh())
        print(
            f"\nfixed at backoff step >= 2 -> both slots created afresh "
            f"{time.monotonic() - fixed:.1f} s later ({created} Exporters before the fix)"
        )
        for exporter in new:
            annotations = exporter["metadata"].get("annotations", {})  # type: ignore[index]
            assert BACKOFF_STEP not in annotations, log.read_text()
            assert annotations.get(REVISION), annotations
        for exporter in new:
            registered(plane, ns, str(exporter["metadata"]["name"]))  # type: ignore[index]
        wait_for(
            "Degraded False", lambda: condition(plane, ns, "Degraded").get("status") == "False"
        )
    finally:
        stop.set()
