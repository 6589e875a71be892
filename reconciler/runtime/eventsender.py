"""Events sent beside the passes: a pass hands its Events to a few sender threads and
goes on with its steps.

An Event is best effort (a pool's step is done whether or not its Event is written), yet
written within the pass each one cost the pass a round trip: 2.5 of the 7 writes a new
instance takes, on the path of every pass while a cluster's pools fill (`bench/RESULTS.md`,
"scale"). client-go's EventRecorder sends from a background broadcaster for the same
reason. The queue is bounded: when it is full (the apiserver far behind), an Event is
dropped and counted, a pass is never held up.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from pool.model.access import EVENTS
from reconciler.runtime.kube import Kube, NotLeading

__all__ = ["EventSender"]

log = logging.getLogger("reconciler.eventsender")  # stable: log filters select by it

Obj = dict[str, Any]


class EventSender:
    def __init__(self, kube: Kube, threads: int = 2, capacity: int = 10_000) -> None:
        self.kube, self.threads = kube, threads
        self._queue: queue.Queue[tuple[str, Obj]] = queue.Queue(capacity)
        self.running = False
        self.sent = 0
        self.dropped = 0

    def send(self, namespace: str, event: Obj) -> None:
        """Queue one Event for `namespace`; dropped (and counted) when the queue is full."""
        try:
            self._queue.put_nowait((namespace, event))
        except queue.Full:
            self.dropped += 1
            waiting = self._queue.qsize()
            log.warning("%s: event %s dropped: %d waiting", namespace, event.get("reason"), waiting)

    def start(self, stop: threading.Event) -> None:
        self.running = True
        for index in range(self.threads):
            threading.Thread(
                target=self._run, args=(stop,), daemon=True, name=f"events-{index}"
            ).start()

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                namespace, event = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.kube.create(EVENTS, namespace, event)
                self.sent += 1
            except NotLeading:
                pass  # a standby again: its Events go with its passes
            except Exception as exc:  # an event must never fail anything
                log.warning("%s: event %s not written: %s", namespace, event.get("reason"), exc)
