"""The pass reads as a sequence: followed from `Controller.sync`, a set's key comes back
to the controller module only between its named steps (the clock, the leftovers, the
observation) before it reaches the planner. Traced over a real pass (`sys.settrace`), so
a step stitched back into the controller shows here, not in a review."""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pool.rules.planner
import reconciler.runtime.controller
from bench.reconciler import filled_controller

CONTROLLER = Path(reconciler.runtime.controller.__file__)
PLANNER = Path(pool.rules.planner.__file__)
MOST_RETURNS = 3


def _returns_to_the_controller_before_the_planner() -> tuple[list[str], str]:
    """The functions whose return brought the pass back into the controller module, in
    order, until the planner's `plan` was called; and the name of the pass's clock."""
    controller, _ = filled_controller(3, 4, 1)
    key = ("ns-0", "pool0")
    controller.sync(key)  # the first pass converges the pool; the traced one is steady
    returns: list[str] = []
    reached = False

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal reached
        if reached:
            return None
        code = frame.f_code
        if event == "call" and Path(code.co_filename) == PLANNER and code.co_name == "plan":
            reached = True
            return None
        caller = frame.f_back
        if (
            event == "return"
            and caller is not None
            and Path(caller.f_code.co_filename) == CONTROLLER
            and Path(code.co_filename) != CONTROLLER
        ):
            returns.append(code.co_name)
        return trace

    sys.settrace(trace)
    try:
        controller.sync(key)
    finally:
        sys.settrace(None)
    assert reached, "the pass never reached the planner"
    return returns, getattr(controller.clock, "__name__", "")


def test_a_pass_comes_back_to_the_controller_only_between_its_steps() -> None:
    returns, clock = _returns_to_the_controller_before_the_planner()
    assert returns == [clock, "look_after", "observe"], returns
    assert len(returns) <= MOST_RETURNS
