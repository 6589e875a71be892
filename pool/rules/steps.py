"""What a stage of the planner hands on: its steps in order, what it holds back (`Wait`)
and when the pass should run again. `join` puts the stages' parts together in the order
the planner calls them. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import chain

from pool.model.actions import Action

__all__ = ["Steps", "Wait", "join", "sooner"]


@dataclass(frozen=True, slots=True)
class Wait:
    """What a pass holds back, and why: a step due at `at` (a scale-down waiting for its
    cooldown), or, without a step, what stops or limits scaling (a problem, the ceiling)."""

    reason: str
    action: Action | None = None
    at: datetime | None = None
    failed: bool = False  # what the last pass failed at (the status says), not a wait


@dataclass(slots=True)
class Steps:
    """A stage's part of a plan: steps in order, waits in order, and the time after which
    the pass should run again (None: nothing of the stage's is due later)."""

    actions: tuple[Action, ...] = ()
    waits: tuple[Wait, ...] = ()
    requeue: timedelta | None = None


def sooner(current: timedelta | None, candidate: timedelta | None) -> timedelta | None:
    if candidate is None:
        return current
    return candidate if current is None else min(current, candidate)


def join(*parts: Steps) -> Steps:
    """The parts one after the other; the soonest requeue of any."""
    requeue = None
    for part in parts:
        requeue = sooner(requeue, part.requeue)
    actions = tuple(chain.from_iterable(part.actions for part in parts))
    return Steps(actions, tuple(chain.from_iterable(part.waits for part in parts)), requeue)
