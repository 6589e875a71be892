"""Removal where Jumpstarter's Lease CRD is not served (`make run`, or a cluster whose
Jumpstarter is not installed yet): a resource that is not served has no objects, so the
live lease check before a delete finds no Lease, and ExitAndReplace and scale-down go on.

A control plane of this module's own, without the Lease CRD (the session's gets it from
other tests). Jumpstarter's released controller cannot run here: it exits at start when
its Lease CRD is not served. So what it would write is played, and only here: the
development stand-in issues credentials and Registered/Online are written by hand
(`objects.play_registered`); the test ends the Pod by hand (`kubectl patch pod
--subresource=status`), as the issue's reproduction does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.stack import reconciler_args
from harness.standin import CredentialStandIn
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class, wait_for
from tests.e2e.objects import play_registered as register
from tests.e2e.test_replacement_e2e import end_pod, instances, pods_of


@pytest.fixture(scope="module")
def bare() -> Iterator[ControlPlane]:
    with running_control_plane() as plane:
        yield plane


def test_exit_and_replace_and_scale_down_go_on_without_the_lease_crd(
    bare: ControlPlane, tmp_path: Path
) -> None:
    plane, ns = bare, "no-leases"
    served = plane.kubectl("api-resources", "--api-group=jumpstarter.dev", "-o", "name").stdout
    assert "leases" not in served, served
    plane.kubectl("create", "namespace", ns)
    stop = threading.Event()
    standin = CredentialStandIn(plane.api_client(), namespace=ns)
    threading.Thread(target=standin.run, args=(stop,), daemon=True).start()
    apply(plane, virtual_target_class("qemu", ns))
    pool = exporter_set("pool", ns, class_name="qemu", with_template=True)
    pool["spec"] |= {"minReplicas": 1, "maxReplicas": 1, "minAvailableReplicas": 1}
    apply(plane, pool)
    cli = reconciler_args(plane.kubeconfig)
    cli += ["--namespace", ns, "--no-leader-election"]
    log = tmp_path / "reconciler.log"
    reconciler = subprocess.Popen(
        [sys.executable, "-m", "virtualtarget.cli", *cli],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        (first,) = wait_for("one instance", lambda: instances(plane, ns))
        uid = first["metadata"]["uid"]
        (pod,) = wait_for("its Pod", lambda: pods_of(plane, ns, uid))
        register(plane, ns, first["metadata"]["name"])
        time.sleep(1.1)  # the Pod ends a second after the exporter registered
        end_pod(plane, ns, pod["metadata"]["name"])  # served, then its Pod finished

        def replaced() -> bool:
            found = instances(plane, ns)
            return len(found) == 1 and found[0]["metadata"]["uid"] != uid

        wait_for("ExitAndReplace to replace it", replaced)
        body = {"spec": {"minReplicas": 0, "minAvailableReplicas": 0, "scaleDownCooldown": "1s"}}
        plane.kubectl(
            "patch", "exporterset", "pool", "-n", ns, "--type=merge", "-p", json.dumps(body)
        )
        wait_for("scale down to 0", lambda: not instances(plane, ns))
        text = log.read_text()
        assert "(retry in" not in text, text  # no pass failed (the live check once did, 404)
        status = lambda: get_json(plane, "exporterset", "pool", "-n", ns)["status"]  # noqa: E731
        wait_for("the status to say so", lambda: status()["replicas"] == 0)
    finally:
        stop.set()
        reconciler.send_signal(signal.SIGKILL)
        reconciler.wait()
