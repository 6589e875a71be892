"""When a set's status may be written next: at most once per `interval` per set.

While a pool fills, each of its events (an Exporter created, its credentials issued, its
Pod pending, then running) wakes a pass, and each pass whose status differs would patch
it: several patches a second for one set, each sent to every watch of ExporterSets. A
pass that would write its status within `interval` of the last write holds it back (and
the Events of the conditions it changes, which follow the write) and has its set passed
again when the interval is up; that pass writes the status as it then is, so a burst of
events makes one patch. Steps that change the pool never wait. Thread-safe; the clock is
injectable so tests need no sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["DEFAULT_INTERVAL", "StatusGate"]

DEFAULT_INTERVAL = 1.0  # seconds


class StatusGate:
    def __init__(
        self, interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval, self.clock = interval, clock
        self._written: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def wait(self, key: Hashable) -> float:
        """Seconds until the set's status may be written again; 0: now."""
        if self.interval <= 0:
            return 0.0
        with self._lock:
            last = self._written.get(key)
        if last is None:
            return 0.0
        return max(0.0, last + self.interval - self.clock())

    def wrote(self, key: Hashable) -> None:
        with self._lock:
            self._written[key] = self.clock()

    def forget(self, key: Hashable) -> None:
        """The set is gone."""
        with self._lock:
            self._written.pop(key, None)
