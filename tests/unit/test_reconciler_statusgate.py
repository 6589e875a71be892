"""A set's status is written at most once per interval: a burst of events makes one patch,
written when the interval is up with what that pass finds; work on the pool never waits."""

from __future__ import annotations

from typing import Any

from bench.namespace import drain
from bench.reconciler import NOW, CountingKube, exporter, exporter_set
from pool.model.access import CLASSES, EXPORTERS, EXPORTERSETS
from pool.rendering.provisioners import provisioner
from reconciler.runtime.controller import Controller
from reconciler.runtime.statusgate import StatusGate
from reconciler.runtime.workqueue import WorkQueue
from tests.unit.test_reconciler_expectations import Clock

KEY = ("ns-0", "a")


class Patches(CountingKube):
    """Counts the status patches apart from the other calls."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[dict[str, Any]] = []

    def patch(
        self, resource: Any, ns: str, name: str, body: dict[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        if sub == "status":
            self.statuses.append(body["status"])
        return super().patch(resource, ns, name, body, sub)


def _gated(clock: Clock) -> tuple[Controller, Patches]:
    kube = Patches()
    controller = Controller(kube, provisioner("qemu.jumpstarter.dev"), clock=lambda: NOW)  # type: ignore[arg-type]
    controller.status_gate = StatusGate(1.0, clock)
    controller.queue = WorkQueue(clock=clock)
    controller.informers[CLASSES].apply(
        "ADDED",
        {
            "metadata": {"name": "qemu", "namespace": "ns-0"},
            "spec": {"provisioner": "qemu.jumpstarter.dev"},
        },
    )
    return controller, kube


def test_statuses_within_the_interval_make_one_patch_written_when_it_is_up() -> None:
    clock = Clock()
    controller, kube = _gated(clock)
    sets, exporters = controller.informers[EXPORTERSETS], controller.informers[EXPORTERS]
    sets.apply("ADDED", exporter_set("ns-0", "a", warm=0))
    drain(controller)
    controller.sync(KEY)
    assert len(kube.statuses) == 1  # the first status: at once
    for index in range(3):  # a burst: each instance changes the counts
        exporters.apply("ADDED", exporter("ns-0", "a", "set-ns-0-a", index, "available"))
        controller.sync(KEY)
    assert len(kube.statuses) == 1  # held back, and the set comes again when the time is up
    drain(controller)  # the Exporters' events
    assert controller.queue.take(timeout=0) is None  # not yet due
    clock.now += 1.0
    assert drain(controller) == [KEY]
    controller.sync(KEY)
    assert len(kube.statuses) == 2
    assert kube.statuses[-1]["replicas"] == 3  # what the last pass found


def test_a_pass_that_changes_the_pool_acts_while_its_status_waits() -> None:
    clock = Clock()
    controller, kube = _gated(clock)
    sets = controller.informers[EXPORTERSETS]
    sets.apply("ADDED", exporter_set("ns-0", "a", warm=0))
    controller.sync(KEY)
    sets.apply("MODIFIED", exporter_set("ns-0", "a", warm=2))
    created = len(kube.created)
    controller.sync(KEY)
    assert EXPORTERS in [r for r, _ in kube.created[created:]]  # not held back
    assert len(kube.statuses) == 1
