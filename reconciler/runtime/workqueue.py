"""A work queue of set keys: de-duplicated, rate-limited, with delayed re-adds.

The semantics of client-go's workqueue, which controllers rely on: a key is queued at
most once; a key being processed is never handed to a second worker, and if it was
added meanwhile it is queued again when the worker calls `done`; failures back off
exponentially per key; `add_after` requeues at a deadline (the next cooldown end), one
deadline per key, the soonest asked (client-go's delaying queue keeps its known entries
so): a later one is dropped, since the pass at the sooner one plans its own next. Kept as
separate deadlines, the requeues of a filling pool's passes came due one after another
once it was at rest, each a pass that found nothing to do.
Keys wait in lanes: a key added with a higher `lane` goes ahead of those in lower lanes
(first come, first served within a lane), and a queued key added again in a higher lane
moves up: a Lease taking a pool's capacity should not wait behind a Pod to create, nor
a Pod whose credentials just came behind the passes that only bring status up to date.
The clock is injectable so tests need no sleeping.

It keeps the figures client-go's workqueue metrics report (`stats()`): adds, retries,
the time each key waited in the queue and the time each took to process, and the start
times of the keys being processed now (for unfinished work and the longest processor).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from scrape.histogram import Histogram

__all__ = ["DURATION_BUCKETS", "QueueStats", "WorkQueue"]

K = TypeVar("K", bound=Hashable)

# client-go's and controller-runtime's buckets for both durations: 10 ns to 1,000 s.
DURATION_BUCKETS = tuple(10e-9 * 10**i for i in range(12))


@dataclass(frozen=True)
class QueueStats:
    depth: int
    adds: int
    retries: int
    queue_duration: Histogram
    work_duration: Histogram
    processing_since: tuple[float, ...]  # clock readings when the keys in work were taken
    now: float


class WorkQueue(Generic[K]):
    def __init__(
        self,
        base_delay: float = 0.05,
        max_delay: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lanes: dict[int, list[K]] = {}  # lane -> its keys in arrival order
        self._queued: dict[K, int] = {}  # queued key -> its lane
        self._processing: set[K] = set()
        self._dirty: dict[K, int] = {}  # added while processing -> the highest lane asked
        self._delayed: list[tuple[float, int, K]] = []  # a heap; superseded entries stay
        self._deadlines: dict[K, tuple[float, int]] = {}  # each delayed key's one (at, serial)
        self._taken_serial: dict[K, int] = {}  # a key in work -> the serial when it was taken
        self._failures: dict[K, int] = {}
        self._serial = 0
        self._cond = threading.Condition()
        self._closed = False
        self.base_delay, self.max_delay, self.clock = base_delay, max_delay, clock
        self._adds = 0
        self._retries = 0
        self._queued_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._queue_duration = Histogram(DURATION_BUCKETS)
        self._work_duration = Histogram(DURATION_BUCKETS)

    def __len__(self) -> int:
        with self._cond:
            return len(self._queued)

    def add(self, key: K, lane: int = 0) -> None:
        with self._cond:
            if self._closed:
                return
            self._adds += 1
            if key in self._processing:
                self._dirty[key] = max(lane, self._dirty.get(key, lane))
            elif key not in self._queued:
                self._enqueue(key, lane)
                self._cond.notify()
            elif lane > self._queued[key]:
                self._lanes[self._queued[key]].remove(key)  # move it up
                self._lanes.setdefault(lane, []).append(key)
                self._queued[key] = lane

    def _enqueue(self, key: K, lane: int = 0) -> None:
        self._queued[key] = lane
        self._lanes.setdefault(lane, []).append(key)
        self._queued_at[key] = self.clock()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            at = self.clock() + delay
            known = self._deadlines.get(key)
            if known is not None and known[0] <= at and not self._before_taken(key, known):
                return  # a sooner requeue of the key waits: its pass plans the next
            self._serial += 1
            self._deadlines[key] = (at, self._serial)
            heapq.heappush(self._delayed, (at, self._serial, key))
            self._cond.notify()

    def replan(self, key: K, delay: float | None) -> None:
        """After a pass that succeeded: its plan's requeue (`delay`, None for none)
        replaces the deadline asked before the key was taken, since a plan is made from
        the state as now observed and an earlier plan's deadline is out of date; one asked
        during the pass (by a step of its own) stays. Without it, the safety-net requeue
        of a pass that waited for credentials came due after the next pass had them all."""
        with self._cond:
            known = self._deadlines.get(key)
            if known is not None and self._before_taken(key, known):
                del self._deadlines[key]  # its heap entry is skipped when it comes due
        if delay is not None:
            self.add_after(key, delay)

    def _before_taken(self, key: K, deadline: tuple[float, int]) -> bool:
        """The key is in work and `deadline` was asked before it was taken: the pass in
        work replans it."""
        taken = self._taken_serial.get(key)
        return taken is not None and deadline[1] <= taken

    def _current(self, entry: tuple[float, int, K]) -> bool:
        at, serial, key = entry
        return self._deadlines.get(key) == (at, serial)

    def add_rate_limited(self, key: K) -> float:
        """Requeue after a failure; returns the delay chosen."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            self._retries += 1
        delay = min(self.max_delay, self.base_delay * float(2**failures))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset the backoff of a key after a successful pass."""
        with self._cond:
            self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        now = self.clock()
        while self._delayed and self._delayed[0][0] <= now:
            at, serial, key = heapq.heappop(self._delayed)
            if self._deadlines.get(key) != (at, serial):
                continue  # superseded, or dropped by a later pass's plan
            del self._deadlines[key]
            if key in self._processing:
                self._dirty.setdefault(key, 0)
            elif key not in self._queued:
                self._enqueue(key)
        while self._delayed and not self._current(self._delayed[0]):
            heapq.heappop(self._delayed)  # a superseded head would wake the workers for nothing
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to process, or None on timeout or once closed and drained."""
        taken = self.take(timeout)
        return taken[0] if taken is not None else None

    def take(self, timeout: float | None = None) -> tuple[K, int] | None:
        """`get`, and the lane the key waited in."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                wait = self._promote_due()
                lane = max((n for n, keys in self._lanes.items() if keys), default=None)
                if lane is not None:
                    key = self._lanes[lane].pop(0)
                    del self._queued[key]
                    self._processing.add(key)
                    self._taken_serial[key] = self._serial
                    now = self.clock()
                    self._queue_duration.observe(now - self._queued_at.pop(key, now))
                    self._started_at[key] = now
                    return key, lane
                if self._closed:
                    return None
                if deadline is not None:
                    left = deadline - self.clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            self._taken_serial.pop(key, None)
            started = self._started_at.pop(key, None)
            if started is not None:
                self._work_duration.observe(self.clock() - started)
            lane = self._dirty.pop(key, None)
            if lane is not None and key not in self._queued:
                self._enqueue(key, lane)
                self._cond.notify()

    def stats(self) -> QueueStats:
        """A consistent snapshot of what the queue's metrics report."""
        with self._cond:
            return QueueStats(
                depth=len(self._queued),
                adds=self._adds,
                retries=self._retries,
                queue_duration=self._queue_duration.copy(),
                work_duration=self._work_duration.copy(),
                processing_since=tuple(self._started_at.values()),
                now=self.clock(),
            )

    def close(self) -> None:
        """Stop handing out keys; workers see None and exit."""
        with self._cond:
            self._closed = True
            self._lanes.clear()
            self._delayed.clear()
            self._deadlines.clear()
            self._queued.clear()
            self._queued_at.clear()
            self._cond.notify_all()
