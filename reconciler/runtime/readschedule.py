"""When a cache that reads objects by name reads each one: at once when something says it
may have changed, and otherwise in a slow safety resync whose total rate is bounded.

A name is read at once when it is first tracked and whenever it is urged (`urge`): the
caller urges a name when an event says it may have changed. Besides, the name read
longest ago is read again once it is older than `floor` seconds, at most `budget` such
reads a second over all names together (over any T seconds at most budget x T + 1).
With N names each is read again about every max(floor, N / budget) seconds, and never
later than floor + N / budget: an idle pool costs at most `budget` reads a second
however large it grows, where a fixed period per name cost N / period. Any read of a
name (urged, resynced, or the answer to a write of the caller's, `read`) starts its age
afresh, so the resync only visits what nothing else has read lately.

No I/O, no clock, no locking: time is the `now` the caller passes, and the caller
serialises the calls.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["ReadSchedule"]

K = TypeVar("K", bound=Hashable)
_NEVER = -math.inf


class ReadSchedule(Generic[K]):
    def __init__(self, budget: float, floor: float, retry: float = 1.0) -> None:
        """`budget`: resync reads a second over all names; `floor`: the least time between
        two resync reads of one name; `retry`: the wait after a failed read."""
        if not budget > 0:
            raise ValueError(f"a read budget must be above 0 a second, not {budget}")
        if floor < 0:
            raise ValueError(f"a resync floor cannot be negative ({floor})")
        self.budget, self.floor, self.retry = budget, floor, retry
        # Every tracked name with the time it was last read, the longest ago first.
        self._last: OrderedDict[K, float] = OrderedDict()
        # Names to read as soon as possible, with the earliest time (later after a failure).
        self._urgent: dict[K, float] = {}
        self._next_resync = _NEVER  # when the budget allows the next resync read
        self.resyncs = 0  # resync reads handed out

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, key: object) -> bool:
        return key in self._last

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._last))

    def track(self, key: K) -> bool:
        """Read `key` from now on, at once if it is new; whether it was new."""
        if key in self._last:
            return False
        self._last[key] = _NEVER
        self._last.move_to_end(key, last=False)
        self._urgent[key] = _NEVER
        return True

    def untrack(self, key: K) -> None:
        self._last.pop(key, None)
        self._urgent.pop(key, None)

    def urge(self, key: K) -> None:
        """Something says `key` may have changed: read it as soon as possible."""
        if key in self._last:
            self._urgent[key] = _NEVER

    def read(self, key: K, now: float) -> None:
        """`key` was read (or written, and the answer kept) at `now`."""
        if key in self._last:
            self._last[key] = now
            self._last.move_to_end(key)
            self._urgent.pop(key, None)

    def failed(self, key: K, now: float) -> None:
        """A read of `key` failed at `now`: try again after `retry` seconds."""
        if key in self._last:
            self._urgent[key] = now + self.retry

    def age(self, key: K, now: float) -> float:
        """Seconds since `key` was last read (infinite if never, or not tracked)."""
        return now - self._last.get(key, _NEVER)

    def due(self, now: float) -> list[K]:
        """What to read now: every urged name whose time has come, then at most one resync
        read (the name read longest ago, if older than `floor`) when the budget allows."""
        keys = [key for key, at in self._urgent.items() if at <= now]
        if now >= self._next_resync:
            stalest = self._stalest()
            if stalest is not None and self._last[stalest] <= now - self.floor:
                keys.append(stalest)
                # On a grid of 1 / budget, so a late caller does not lower the rate; after
                # an idle spell at most one more read follows at once.
                interval = 1.0 / self.budget
                self._next_resync = max(self._next_resync, now - interval) + interval
                self.resyncs += 1
        return keys

    def wake_at(self, now: float) -> float:
        """When `due` may next have something (infinite when nothing is tracked)."""
        at = min(self._urgent.values(), default=math.inf)
        stalest = self._stalest()
        if stalest is not None:
            at = min(at, max(self._next_resync, self._last[stalest] + self.floor))
        return max(at, now) if at != math.inf else at

    def _stalest(self) -> K | None:
        """The name read longest ago that is not already waiting as urgent."""
        for key in self._last:
            if key not in self._urgent:
                return key
        return None
