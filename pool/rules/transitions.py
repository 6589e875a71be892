"""The Events of condition transitions, as Jumpstarter's exporter-set controller writes
them: one when a condition turns True (a missing one counts as not True) and one when it
stops being True, compared between the status the set had and the one a pass writes.
Turning unavailable, degraded or limited is a Warning. No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pool.model.actions import RecordEvent
from pool.model.reasons import (
    SCALING_LIMITED,
    SCALING_UNLIMITED,
    SET_AVAILABLE,
    SET_DEGRADED,
    SET_PROGRESSING,
    SET_RECOVERED,
    SET_SETTLED,
    SET_UNAVAILABLE,
)
from pool.model.status import condition_of

# condition type -> ((reason, warning) on turning True, (reason, warning) on leaving True)
TRANSITIONS: Mapping[str, tuple[tuple[str, bool], tuple[str, bool]]] = {
    "Available": ((SET_AVAILABLE, False), (SET_UNAVAILABLE, True)),
    "Progressing": ((SET_PROGRESSING, False), (SET_SETTLED, False)),
    "Degraded": ((SET_DEGRADED, True), (SET_RECOVERED, False)),
    "ScalingLimited": ((SCALING_LIMITED, True), (SCALING_UNLIMITED, False)),
}

REASONS = frozenset(reason for pair in TRANSITIONS.values() for reason, _ in pair)


def transition_events(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[RecordEvent]:
    """The Events of the conditions that turned True or stopped being True."""
    events = []
    for kind, ((on, on_warning), (off, off_warning)) in TRANSITIONS.items():
        condition = condition_of(after, kind)
        true = condition.get("status") == "True"
        if true == (condition_of(before, kind).get("status") == "True"):
            continue
        state = condition.get("status", "gone")
        note = f"{kind} {state}"
        if condition.get("reason"):
            note += f" ({condition['reason']})"
        if condition.get("message"):
            note += f": {condition['message']}"
        reason, warning = (on, on_warning) if true else (off, off_warning)
        events.append(RecordEvent(reason, note, warning=warning))
    return events
