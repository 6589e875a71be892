"""A pass's report: the steps that tell what it did (the set's status and Events, written
after its work, so a status never claims work that failed), and its log lines in the
planner's words (`pool.rules.explain`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pool.model.actions import Action, PatchStatus, RecordEvent
from pool.rules.explain import UPDATE_STATUS, held, steps
from pool.rules.planner import Plan
from pool.rules.steps import Wait
from reconciler.runtime.cache import ObjKey

__all__ = ["REPORT", "log_pass", "report"]

log = logging.getLogger("reconciler.controller")  # stable: log filters select by it

# The steps that report on a pass rather than change the pool: the status and Events.
REPORT = (PatchStatus, RecordEvent)


def report(result: Plan) -> list[Action]:
    """The steps that report on the pass: its status and Events."""
    return [a for a in result.actions if isinstance(a, REPORT)]


def log_pass(key: ObjKey, done: Iterable[Action], waits: Iterable[Wait]) -> None:
    """The steps a pass carried out and what it held back, in the planner's words: a
    pass that acted at INFO (its status write at DEBUG), a quiet one at DEBUG."""
    done = list(done)
    level = logging.INFO if done else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    for step in steps(done) + held(waits):
        quiet = step.verb == UPDATE_STATUS
        log.log(logging.DEBUG if quiet else level, "%s/%s: %s", *key, step)
