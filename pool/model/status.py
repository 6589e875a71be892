"""The ExporterSet status a pass observes: counters, `selector` and four conditions.

Pure: the planner calls `build_status` with what it counted and decided, and writes the
result only when it differs from the observed status. Condition `lastTransitionTime`
is carried over while a condition's status stays the same, and no message embeds the
current time, so a constant world yields a byte-identical status and no write.

What each counter and condition means is decided by the planner's status stage
(`pool.rules.stages.status`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pool.model.timefmt import format_time

__all__ = ["CONDITION_TYPES", "ConditionSpec", "Counters", "build_status"]

CONDITION_TYPES = ("Available", "Progressing", "Degraded", "ScalingLimited")


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Counters:
    replicas: int = 0
    available: int = 0
    ready: int = 0
    unavailable: int = 0
    leased: int = 0
    active: int = 0
    idle: int = 0
    offline: int = 0
    disabled: int = 0
    pods_pending: int = 0
    pods_running: int = 0
    pods_failed: int = 0
    pods_unknown: int = 0


def _conditions(
    wanted: Sequence[ConditionSpec],
    previous: Sequence[Mapping[str, Any]],
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    before = {c.get("type"): c for c in previous if isinstance(c, Mapping)}
    result = []
    for spec in wanted:
        status = "True" if spec.status else "False"
        old = before.get(spec.type)
        since = (
            old["lastTransitionTime"]
            if old and old.get("status") == status and old.get("lastTransitionTime")
            else format_time(now)
        )
        result.append(
            {
                "type": spec.type,
                "status": status,
                "reason": spec.reason,
                "message": spec.message,
                "observedGeneration": generation,
                "lastTransitionTime": since,
            }
        )
    return result


def condition_of(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The condition of that type in an object's status ({} when there is none)."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, Sequence) else ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return {}


def build_status(
    counters: Counters,
    selector: str,
    conditions: Sequence[ConditionSpec],
    previous: Mapping[str, Any],
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    return {
        "replicas": counters.replicas,
        "availableReplicas": counters.available,
        "readyReplicas": counters.ready,
        "unavailableReplicas": counters.unavailable,
        "leasedReplicas": counters.leased,
        "exportersActive": counters.active,
        "exportersIdle": counters.idle,
        "exportersOffline": counters.offline,
        "exportersDisabled": counters.disabled,
        "podsPending": counters.pods_pending,
        "podsRunning": counters.pods_running,
        "podsFailed": counters.pods_failed,
        "podsUnknown": counters.pods_unknown,
        "selector": selector,
        "conditions": _conditions(conditions, previous.get("conditions") or [], generation, now),
    }
