"""The webhook while kube-apiserver cannot be reached: a review that needs a cluster read
(a class it has not cached) is denied with a retryable message, the webhook's own answer
once its budget is spent or the connection refused, not a caller's timeout; one that needs
none is answered as always. Paused (it hangs) and killed (it refuses). How long each
answer took is recorded with `recovery`."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane
from harness.stack import running_webhook
from tests.chaos.support import review
from tests.e2e.objects import exporter_set, virtual_target_class
from webhook.app import budget_seconds


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
            recovery(f"retryable denial, apiserver {fault}", took)
            message = response["status"]["message"]
            assert response["allowed"] is False
            assert response["status"]["code"] == 503
            assert "retry the request" in message
            # The webhook answered by itself: its read gave up at its budget (paused) or on
            # the refused connection (killed), so kube-apiserver's own timeout never came.
            gave_up = {
                "paused": f"apiserver did not answer within {budget_seconds('4s'):.1f}s",
                "killed": "apiserver unreachable",
            }[fault]
            assert gave_up in message, message

            needs_none, took = review(server, virtual_target_class("qemu", ns), timeout="4s")
            assert needs_none["allowed"] is True
            recovery(f"class review answered, apiserver {fault}", took)
            server.process.check_alive()
        finally:
            if fault == "paused":
                plane.resume("kube-apiserver")
            else:
                plane.restart("kube-apiserver")
