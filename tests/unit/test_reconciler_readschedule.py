"""The read scheduler of the Secrets read by name, on a virtual clock: reads at once when
something says a name may have changed, and a safety resync whose total rate is the
budget, however many names are tracked."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.runtime.readschedule import ReadSchedule

K = TypeVar("K", int, str)


def _run(schedule: ReadSchedule[K], start: float, end: float, step: float) -> dict[K, list[float]]:
    """Read whatever is due at every `step` from `start` to `end`; each name's read times."""
    reads: dict[K, list[float]] = defaultdict(list)
    now = start
    while now < end:
        for key in schedule.due(now):
            reads[key].append(now)
            schedule.read(key, now)
        now += step
    return reads


def _tracked_and_read(schedule: ReadSchedule[K], keys: Iterable[K]) -> None:
    """Track `keys` and read them (new names are due at once) at time 0."""
    for key in keys:
        schedule.track(key)
    for key in schedule.due(0):
        schedule.read(key, 0)


def test_a_new_name_is_read_at_once_then_left_alone_until_the_floor() -> None:
    schedule: ReadSchedule[str] = ReadSchedule(budget=1, floor=60)
    assert schedule.track("a") and not schedule.track("a")
    assert schedule.due(0) == ["a"]
    schedule.read("a", 0)
    assert schedule.due(1) == [] and schedule.due(59) == []
    assert schedule.wake_at(1) == 60
    assert schedule.due(60) == ["a"]


def test_the_resync_of_many_names_reads_at_the_budget_and_reaches_every_name() -> None:
    names, budget = 1_000, 2.0
    schedule: ReadSchedule[int] = ReadSchedule(budget=budget, floor=60)
    for key in range(names):
        schedule.track(key)
    first = schedule.due(0)  # every new name at once: what the budget bounds is the resync
    assert len(first) == names
    for key in first:
        schedule.read(key, 0)
    reads = _run(schedule, 0.1, 2_000, 0.1)
    total = sum(len(times) for times in reads.values())
    assert total <= 2_000 * budget + 1  # never above the budget
    assert total >= 2_000 * budget * 0.9  # and it is used: ~budget a second
    period = names / budget  # 500 s: each name once per round
    assert set(reads) == set(range(names))
    for times in reads.values():  # (the first resync read comes once the floor is past)
        gaps = [b - a for a, b in pairwise(times)]
        assert gaps and all(period * 0.95 <= gap <= period * 1.05 for gap in gaps), gaps


def test_few_names_are_read_no_more_often_than_the_floor() -> None:
    schedule: ReadSchedule[str] = ReadSchedule(budget=5, floor=60)
    _tracked_and_read(schedule, "abc")
    reads = _run(schedule, 1, 601, 1)
    assert sorted(reads) == ["a", "b", "c"]
    assert all(len(times) in (9, 10) for times in reads.values())  # 3/60 a second, not 5
    assert all(b - a >= 60 for times in reads.values() for a, b in pairwise(times))


def test_an_urged_name_is_read_at_once_whatever_the_budget() -> None:
    schedule: ReadSchedule[int] = ReadSchedule(budget=0.01, floor=0)
    _tracked_and_read(schedule, range(3))
    assert schedule.due(1) == [0]  # the resync: the stalest name
    schedule.read(0, 1)
    assert schedule.due(1) == [1]  # after an idle spell one more at once, then
    schedule.read(1, 1)
    assert schedule.due(2) == []  # the budget is spent for 100 s
    schedule.urge(2)
    schedule.urge(99)  # not tracked: nothing to read
    assert schedule.due(2) == [2]
    schedule.read(2, 2)
    assert schedule.due(3) == []


def test_any_read_starts_a_name_s_age_afresh_so_the_resync_skips_it() -> None:
    schedule: ReadSchedule[str] = ReadSchedule(budget=1, floor=10)
    _tracked_and_read(schedule, "ab")
    schedule.read("a", 8)  # the answer to a write of ours, say
    assert schedule.age("a", 9) == 1 and schedule.age("zz", 9) == float("inf")
    assert schedule.due(10) == ["b"]
    schedule.read("b", 10)
    assert schedule.due(11) == []
    assert schedule.due(18) == ["a"]


def test_a_failed_read_is_retried_later_without_holding_up_the_others() -> None:
    schedule: ReadSchedule[str] = ReadSchedule(budget=1, floor=10, retry=1)
    for key in "ab":
        schedule.track(key)
    assert schedule.due(0) == ["a", "b"]
    schedule.failed("a", 0)
    schedule.read("b", 0)
    assert schedule.due(0.5) == []
    assert schedule.wake_at(0.5) == 1
    assert schedule.due(1) == ["a"]
    schedule.read("a", 1)
    assert schedule.due(10) == ["b"]  # the resync goes on


def test_an_untracked_name_is_never_read_again() -> None:
    schedule: ReadSchedule[str] = ReadSchedule(budget=1, floor=0)
    schedule.track("a")
    schedule.untrack("a")
    schedule.read("a", 0)  # a read that was under way: ignored
    assert schedule.due(100) == [] and len(schedule) == 0
    assert schedule.wake_at(100) == float("inf")


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="above 0"):
        ReadSchedule(budget=0, floor=60)
    with pytest.raises(ValueError, match="negative"):
        ReadSchedule(budget=1, floor=-1)


@settings(max_examples=40, deadline=None)
@given(
    names=st.integers(1, 300),
    budget=st.sampled_from([0.5, 1.0, 4.0]),
    floor=st.sampled_from([0.0, 30.0, 120.0]),
)
def test_resync_reads_never_exceed_the_budget(names: int, budget: float, floor: float) -> None:
    schedule: ReadSchedule[int] = ReadSchedule(budget=budget, floor=floor)
    for key in range(names):
        schedule.track(key)
    for key in schedule.due(0):
        schedule.read(key, 0)
    window = 300.0
    reads = _run(schedule, 0.25, window, 0.25)
    total = sum(len(times) for times in reads.values())
    assert total <= window * budget + 1
    # and each name waits no longer than floor + names / budget (plus a step)
    bound = floor + names / budget + 0.25
    last = {key: 0.0 for key in range(names)}
    for key, times in reads.items():
        for at in times:
            assert at - last[key] <= bound
            last[key] = at
    assert all(window - at <= bound for at in last.values())
