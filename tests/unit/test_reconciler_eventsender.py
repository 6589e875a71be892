"""Events are sent beside the passes, by the sender's threads; a full queue drops, it
never holds a pass up."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.reconciler import CountingKube, exporter_set
from pool.model.access import CLASSES, EVENTS, EXPORTERSETS
from pool.rendering.provisioners import provisioner
from reconciler.runtime.controller import Controller
from reconciler.runtime.eventsender import EventSender


class Recorder:
    def __init__(self) -> None:
        self.created: list[tuple[str, str]] = []

    def create(self, _resource: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append((namespace, body["reason"]))
        return body


def test_queued_events_are_sent_in_order_and_a_full_queue_drops() -> None:
    kube = Recorder()
    sender = EventSender(kube, threads=1, capacity=2)  # type: ignore[arg-type]
    for reason in ("First", "Second", "Third"):
        sender.send("lab", {"reason": reason})
    assert sender.dropped == 1
    stop = threading.Event()
    sender.start(stop)
    deadline = time.monotonic() + 30
    while len(kube.created) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    assert kube.created == [("lab", "First"), ("lab", "Second")]
    assert sender.sent == 2


def test_a_running_controller_s_pass_hands_its_events_to_the_sender() -> None:
    kube = CountingKube()
    controller = Controller(kube, provisioner("qemu.jumpstarter.dev"))  # type: ignore[arg-type]
    klass = {
        "metadata": {"name": "qemu", "namespace": "lab"},
        "spec": {"provisioner": "qemu.jumpstarter.dev"},
    }
    controller.watches[CLASSES].apply("ADDED", klass)
    controller.watches[EXPORTERSETS].apply("ADDED", exporter_set("lab", "pool", warm=2))
    controller.events.running = True  # as `run` starts it (its threads are not needed here)
    controller.sync(("lab", "pool"))
    assert not [body for resource, body in kube.created if resource is EVENTS]
    assert controller.events._queue.qsize() == 3  # two instances created, and the wait
