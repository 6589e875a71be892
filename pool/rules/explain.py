"""A plan in words, one line per step: what the reconciler logs and `virtualtarget plan`
prints, from the reasons the planner gave (`why` on a step, `Plan.waits`).

Steps of one verb with the same reason and due time are grouped on one line:

    create 2 (pool-0, pool-1): warm buffer 2, available 0
    remove pool-3 at 2026-01-01T12:05:00Z: surplus since 2026-01-01T12:00:00Z, cooldown 5m
    waiting: VirtualTargetClass "qemu-x86" not found in namespace "lab"

`VERBS` lists every verb, in the order a pass takes its steps; `WAITING` is the verb of
what a pass holds back without a step (a problem that stops scaling, the ceiling), and
`FAILED` of the step the last pass failed at (as the set's Degraded condition says). A
step held back until a cooldown ends keeps its own verb and gets `at`. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_never

from pool.model.actions import (
    Action,
    CreateExporter,
    CreatePod,
    DeletePod,
    LiftFence,
    MarkServed,
    PatchStatus,
    PromoteStandby,
    Protect,
    RecordEvent,
    RememberBackoff,
    RememberDemand,
    Remove,
    Retain,
    SetSurplusSince,
    Unprotect,
)
from pool.model.timefmt import format_time
from pool.rules.planner import Plan
from pool.rules.steps import Wait

__all__ = [
    "FAILED",
    "UPDATE_STATUS",
    "VERBS",
    "WAITING",
    "Step",
    "describe",
    "explain",
    "held",
    "steps",
]

UPDATE_STATUS = "update status"
WAITING = "waiting"
FAILED = "failed"
VERBS = (
    "create standby",
    "promote standby",
    "protect",
    "mark served",
    "unprotect",
    "note backoff",
    "forget backoff",
    "remove",
    "delete",
    "lift fence",
    "retain",
    "delete pod",
    "create pod",
    "create",
    "note surplus",
    "forget surplus",
    "note demand",
    "record event",
    UPDATE_STATUS,
    WAITING,
    FAILED,
)
_LISTED = 6  # names spelled out on one line before the rest is only counted


@dataclass(frozen=True, slots=True)
class Step:
    """One line: a verb on some instances (none for a pool-wide step), why, and when a
    held-back step becomes due."""

    verb: str
    names: tuple[str, ...] = ()
    reason: str = ""
    at: datetime | None = None

    def __str__(self) -> str:
        text = self.verb
        if len(self.names) == 1:
            text += f" {self.names[0]}"
        elif len(set(self.names)) == 1:  # creates: one generateName for all
            text += f" {len(self.names)} ({self.names[0]})"
        elif self.names:
            shown = self.names if len(self.names) <= _LISTED else self.names[: _LISTED - 1]
            more = (
                f", ... {len(self.names) - len(shown)} more" if len(shown) < len(self.names) else ""
            )
            text += f" {len(self.names)} ({', '.join(shown)}{more})"
        if self.at is not None:
            text += f" at {format_time(self.at)}"
        return f"{text}: {self.reason}" if self.reason else text

    def as_json(self) -> dict[str, Any]:
        """The `virtualtarget plan -o json` shape of a step."""
        return {
            "verb": self.verb,
            "names": list(self.names),
            "reason": self.reason,
            "at": format_time(self.at) if self.at is not None else None,
        }


def describe(action: Action) -> tuple[str, str, str]:
    """(verb, instance name or "", reason) of one step."""
    match action:
        case CreateExporter(prefix, why, _, _, standby):
            return ("create standby" if standby else "create"), f"{prefix}*", why
        case PromoteStandby(name, why):
            return "promote standby", name, why
        case CreatePod(name, why):
            return "create pod", name, why
        case DeletePod(name, why):
            return "delete pod", name, why
        case Remove(name, fence, why):
            return ("remove" if fence else "delete"), name, why
        case LiftFence(name, why):
            return "lift fence", name, why
        case Retain(name, why):
            return "retain", name, why
        case MarkServed(name, lease):
            return "mark served", name, f"leased by {lease}"
        case Protect(name, why, served):
            return "protect", name, f"{why}; marked as having served it" if served else why
        case Unprotect(name, why):
            return "unprotect", name, why
        case SetSurplusSince(since, why):
            return ("note surplus" if since is not None else "forget surplus"), "", why
        case RememberBackoff(backoff, why):
            return ("note backoff" if backoff is not None else "forget backoff"), "", why
        case RememberDemand(_, why):
            return "note demand", "", why
        case PatchStatus():
            return UPDATE_STATUS, "", ""
        case RecordEvent(reason, note):
            return "record event", "", f"{reason}, {note}"
        case _:
            assert_never(action)


def _grouped(items: Iterable[tuple[str, str, str, datetime | None]]) -> list[Step]:
    groups: dict[tuple[str, str, datetime | None], list[str]] = {}
    for verb, name, reason, at in items:
        names = groups.setdefault((verb, reason, at), [])
        if name:
            names.append(name)
    return [Step(verb, tuple(names), reason, at) for (verb, reason, at), names in groups.items()]


def steps(actions: Iterable[Action]) -> list[Step]:
    """The steps a pass takes now, grouped."""
    return _grouped((*describe(action), None) for action in actions)


def held(waits: Iterable[Wait]) -> list[Step]:
    """What a pass holds back: due steps with their time, and the waits without a step."""
    items: list[tuple[str, str, str, datetime | None]] = []
    for wait in waits:
        if wait.action is None:
            items.append((FAILED if wait.failed else WAITING, "", wait.reason, wait.at))
        else:
            verb, name, _ = describe(wait.action)
            items.append((verb, name, wait.reason, wait.at))
    return _grouped(items)


def explain(result: Plan) -> list[Step]:
    """Every line of a plan: the steps taken now, then what is held back."""
    return steps(result.actions) + held(result.waits)
