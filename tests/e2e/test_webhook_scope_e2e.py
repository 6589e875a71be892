"""Our webhooks never stand between Jumpstarter and its own Exporters.

With the webhook configurations registered and the webhook process stopped (every call
to it fails, and its failurePolicy is Fail), an Exporter outside our pools is still
created and updated: only the Exporters our pools own (the set label) go through it.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.stack import register_webhooks, running_webhook, unregister_webhooks
from pool.model.keys import SET_LABEL
from tests.e2e.objects import apply, get_json, try_apply


def exporter(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Exporter",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"username": name},
    }


def test_exporters_outside_the_pools_do_not_wait_on_a_stopped_webhook(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    plane, ns = control_plane, namespace
    with running_webhook(plane, tmp_path) as server:
        register_webhooks(plane, server)
        try:
            server.process.stop(sig=signal.SIGINT)  # registered, but nothing answers any more

            hardware = exporter("bench-rpi4", ns, {"board": "rpi4"})
            result = try_apply(plane, hardware)
            assert result.returncode == 0, result.stderr
            plane.kubectl(
                "patch",
                "exporter",
                "bench-rpi4",
                "-n",
                ns,
                "--type=merge",
                "-p",
                json.dumps({"spec": {"enabled": False}}),
            )
            stored = get_json(plane, "exporter", "bench-rpi4", "-n", ns)
            assert stored["spec"]["enabled"] is False

            # An Exporter a pool owns still goes through the (now failing) webhook.
            owned = try_apply(plane, exporter("pool-0", ns, {SET_LABEL: "pool"}))
            assert owned.returncode == 1
            assert "failed calling webhook" in owned.stderr
        finally:
            unregister_webhooks(plane)
    apply(plane, exporter("pool-0", ns, {SET_LABEL: "pool"}))  # unregistered: admitted
