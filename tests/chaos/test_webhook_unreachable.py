"""The webhook while kube-apiserver cannot be reached: a review that needs a cluster read
(a class it has not cached) is denied with a retryable message within its budget; one
that needs none is answered as always. Paused (it hangs) and killed (it refuses)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane
from harness.stack import running_webhook
from tests.chaos.support import review
from tests.e2e.objects import exporter_set, virtual_target_class


@pytest.mark.parametrize("fault", ["paused", "killed"])
def test_reviews_needing_the_cluster_are_retryable_denials_within_their_budget(
    fault: str,
    plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
    recovery: Callable[[str, float], None],
) -> None:
    ns = namespace
    with running_webhook(plane, tmp_path) as server:
        if fault == "paused":
            plane.pause("kube-apiserver")
        else:
            plane.kill("kube-apiserver", signal.SIGKILL)
        try:
            needs_cluster = exporter_set("pool", ns, class_name="not-cached", with_template=True)
            # kube-apiserver gives the webhook 4 s here; the webhook's budget is half of it.
            response, took = review(server, needs_cluster, timeout="4s")
            assert response["allowed"] is False
            assert response["status"]["code"] == 503
            assert "retry the request" in response["status"]["message"]
            assert took < 4, took  # answered before the apiserver would have given up
            recovery(f"retryable denial, apiserver {fault}", took)

            needs_none, took = review(server, virtual_target_class("qemu", ns), timeout="4s")
            assert needs_none["allowed"] is True
            recovery(f"class review answered, apiserver {fault}", took)
            server.process.check_alive()
        finally:
            if fault == "paused":
                plane.resume("kube-apiserver")
            else:
                plane.restart("kube-apiserver")
