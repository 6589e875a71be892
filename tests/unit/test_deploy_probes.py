"""Quiet starts and stops, checked on the rendered Deployments: every container has a
startup probe on its readiness endpoint whose first try comes after the measured start
(docs/install.md, "Quiet starts"), which readiness and liveness wait for, and a slow start gets a
minute before liveness could restart it; no readiness probe runs after it."""

from __future__ import annotations

from typing import Any

import pytest

from harness.deploy_render import OVERLAYS, render_overlay

# The slowest start measured from process start to /readyz 200 (seconds, loopback, 2
# busy cores: webhook 1.1-2.5, reconciler 0.8-2.1), which the first try must come after.
MEASURED_START_S = 2.5
# Time for an endpoint to leave the Service: the EndpointSlice update reaching kube-proxy
# and the apiserver's connections moving to another Pod.
PROPAGATION_S = 5


def containers(overlay: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{o['metadata']['name']}/{c['name']}", c)
        for o in render_overlay(overlay)
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_startup_probe_gates_the_others_and_first_tries_after_the_measured_start(
    overlay: str,
) -> None:
    found = containers(overlay)
    assert len(found) == 2
    for name, container in found:
        startup = container["startupProbe"]
        assert startup["httpGet"]["path"] == "/readyz", name
        # /readyz stays 200 once the caches synced: a readiness probe after the start
        # could only fail while the Pod terminates (the kubelet runs it until the end).
        assert "readinessProbe" not in container, name
        assert startup["initialDelaySeconds"] >= 2 * MEASURED_START_S, name
        budget = (
            startup["initialDelaySeconds"] + startup["periodSeconds"] * startup["failureThreshold"]
        )
        print(f"{name}: first try at {startup['initialDelaySeconds']} s, gives up at {budget} s")
        assert budget >= 60, name
        # Nothing to delay: the kubelet runs no liveness probe before the startup probe passes.
        assert "initialDelaySeconds" not in container["livenessProbe"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_webhook_serves_on_before_it_is_told_to_stop(overlay: str) -> None:
    """The webhook keeps its port open while its endpoint leaves the Service, so the
    apiserver has stopped sending it reviews when it stops (tests/node/test_install.py:
    no failed admission and no probe failure in a rollout restart)."""
    (webhook,) = [c for name, c in containers(overlay) if name.startswith("virtualtarget-webhook/")]
    assert webhook["lifecycle"]["preStop"]["sleep"]["seconds"] >= PROPAGATION_S
