"""The Events of condition transitions, with Jumpstarter's exporter-set controller's
reasons: one when a condition turns True (a missing one is not True), one when it stops
being True; Warning for unavailable, degraded and limited; none while nothing changes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pool.model.actions import PatchStatus, RecordEvent
from pool.model.reasons import (
    SCALING_UNLIMITED,
    SET_AVAILABLE,
    SET_PROGRESSING,
    SET_SETTLED,
    SET_UNAVAILABLE,
)
from pool.rules.transitions import TRANSITIONS, transition_events
from tests.unit.test_reconciler_planner import of, run
from tests.unit.test_reconciler_support import booting, ready


def status(**states: str) -> dict[str, Any]:
    return {
        "conditions": [
            {"type": kind, "status": state, "reason": f"{kind}Reason", "message": "m"}
            for kind, state in states.items()
        ]
    }


def test_a_first_status_reports_what_is_true() -> None:
    after = status(Available="True", Progressing="True", Degraded="False", ScalingLimited="False")
    assert transition_events({}, after) == [
        RecordEvent(SET_AVAILABLE, "Available True (AvailableReason): m"),
        RecordEvent(SET_PROGRESSING, "Progressing True (ProgressingReason): m"),
    ]


def test_leaving_true_is_reported_and_unavailable_is_a_warning() -> None:
    before = status(Available="True", Progressing="True", ScalingLimited="True")
    after = status(Available="False", Progressing="False", ScalingLimited="False")
    assert [(e.reason, e.warning) for e in transition_events(before, after)] == [
        (SET_UNAVAILABLE, True),
        (SET_SETTLED, False),
        (SCALING_UNLIMITED, False),
    ]


@given(
    st.dictionaries(st.sampled_from(list(TRANSITIONS)), st.sampled_from(["True", "False"])),
    st.dictionaries(st.sampled_from(list(TRANSITIONS)), st.sampled_from(["True", "False"])),
)
def test_one_event_per_condition_that_changed_truth(
    before: dict[str, str], after: dict[str, str]
) -> None:
    events = transition_events(status(**before), status(**after))
    changed = [k for k in TRANSITIONS if (before.get(k) == "True") != (after.get(k) == "True")]
    assert len(events) == len(changed)
    for kind, event in zip(changed, events, strict=True):
        on, off = TRANSITIONS[kind]
        assert (event.reason, event.warning) == (on if after.get(kind) == "True" else off)
    assert transition_events(status(**after), status(**after)) == []


def test_a_pool_that_fills_progresses_then_settles_and_becomes_available() -> None:
    first = run([], min_available=2)
    assert [e.reason for e in of(first, RecordEvent)] == [SET_PROGRESSING]
    assert isinstance(first.actions[-2], PatchStatus)  # the Events follow the status write
    booted = run([booting("pool-0"), booting("pool-1")], min_available=2, status=first.status)
    assert not of(booted, RecordEvent)  # still progressing: nothing turned
    filled = run([ready("pool-0"), ready("pool-1")], min_available=2, status=booted.status)
    assert [e.reason for e in of(filled, RecordEvent)] == [SET_AVAILABLE, SET_SETTLED]
    again = run([ready("pool-0"), ready("pool-1")], min_available=2, status=filled.status)
    assert not of(again, RecordEvent)
