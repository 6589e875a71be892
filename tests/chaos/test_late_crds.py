"""Jumpstarter's Lease CRD installed after the reconciler started: its cache finds the
resource within seconds, and a pending Lease gets its instance."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.stack import running_reconciler
from pool.model.keys import instance_selector
from tests.chaos.support import names, until
from tests.e2e.objects import apply, exporter_set, install_lease_crd, lease, virtual_target_class

# What the cache's retry of a resource that is not served is built for (0.5 s doubling to
# at most 2 s), plus a pass: the bound the issue set.
WITHIN = 5.0


@pytest.fixture(scope="module")
def bare_plane() -> Iterator[ControlPlane]:
    """A control plane of its own, without the Lease CRD."""
    with running_control_plane() as plane:
        yield plane


def test_a_lease_crd_installed_late_is_used_within_seconds(
    bare_plane: ControlPlane, tmp_path: Path, recovery: Callable[[str, float], None]
) -> None:
    plane, ns = bare_plane, "late"
    plane.kubectl("create", "namespace", ns)
    apply(plane, virtual_target_class("lazy", ns, bindingMode="WaitForFirstConsumer"))
    labels = {"board": "late"}
    apply(plane, exporter_set("pool", ns, class_name="lazy", labels=labels, with_template=True))
    extra = ["--namespace", ns, "--no-leader-election"]
    with running_reconciler(plane, tmp_path, extra=extra) as reconciler:
        until("the reconciler runs", lambda: "reconciling (" in reconciler.log_tail(50), 60)
        time.sleep(6)  # long enough for the cache's retry to back off to its longest wait
        # No instance without a Lease (the pool's standby, with no Pod, is none).
        instances = ("-l", instance_selector("pool"))
        assert names(plane, "exporters", ns, *instances) == []
        started = time.monotonic()
        install_lease_crd(plane)  # applied, then waited for until Established
        apply(plane, lease("first", ns, labels))
        until(
            "an instance for the Lease",
            lambda: len(names(plane, "exporters", ns, *instances)) == 1,
            WITHIN,
        )
        recovery("Lease CRD applied late: instance created", time.monotonic() - started)
        reconciler.check_alive()
