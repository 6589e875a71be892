"""The work queue's lanes, and which of a plan's steps a pass in each carries out.

A key in a higher lane first gets a pass that only takes that lane's steps (the
replacements a Lease calls for; the Pods credentials allow), then waits its turn for the
rest (served marks, Secrets, status): with many pools leased at once, refills and Pods
do not queue behind the writes that can wait, and Pods do not hold up refills.
"""

from __future__ import annotations

from enum import IntEnum

from pool.model.actions import Action, CreateExporter, CreatePod
from pool.rules.planner import Plan
from reconciler.runtime.report import REPORT

__all__ = ["LANE_STEPS", "Lane", "lane_work"]


class Lane(IntEnum):
    """The work queue's lanes, the highest served first (`WorkQueue.add`)."""

    ORDINARY = 0
    PODS = 1  # credentials came: the instance's config Secret and Pod
    REFILL = 2  # a Lease took capacity: the replacement instances


# What a pass taken from a lane above the ordinary one carries out.
LANE_STEPS: dict[Lane, type] = {Lane.REFILL: CreateExporter, Lane.PODS: CreatePod}


def lane_work(result: Plan, lane: Lane) -> list[Action]:
    """The steps of `result` a pass in `lane` carries out before its report: all but the
    report in the ordinary lane, only the lane's own in a higher one."""
    work: list[Action] = [a for a in result.actions if not isinstance(a, REPORT)]
    if lane not in LANE_STEPS:
        return work
    return [a for a in work if isinstance(a, LANE_STEPS[lane])]
