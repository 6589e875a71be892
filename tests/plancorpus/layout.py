"""Where the planner and the types of its input and output live.

The corpus names types by class name only; this table says which module holds each, so
the codec reads and writes the same JSON whatever the package layout.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

PLANNER = "reconciler.planner:plan"

TYPES = (
    "reconciler.observe:Observation",
    "reconciler.observe:PoolView",
    "reconciler.observe:ClassView",
    "reconciler.observe:ExporterView",
    "reconciler.observe:HookRecord",
    "reconciler.observe:PodView",
    "reconciler.observe:LeaseView",
    "reconciler.status:ConditionSpec",
    "reconciler.backoff:Backoff",
    "reconciler.buckets:Bucket",
    "reconciler.planner:Plan",
    "reconciler.planner:Wait",
    "reconciler.actions:CreateExporter",
    "reconciler.actions:CreatePod",
    "reconciler.actions:DeletePod",
    "reconciler.actions:Remove",
    "reconciler.actions:Retain",
    "reconciler.actions:MarkServed",
    "reconciler.actions:SetSurplusSince",
    "reconciler.actions:RememberBackoff",
    "reconciler.actions:PatchStatus",
    "reconciler.actions:RecordEvent",
)


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def planner_module() -> Any:
    return importlib.import_module(PLANNER.partition(":")[0])


def planner() -> Callable[..., Any]:
    fn: Callable[..., Any] = _load(PLANNER)
    return fn


def types() -> dict[str, type]:
    """Class name -> class, for every type the corpus holds."""
    return {path.partition(":")[2]: _load(path) for path in TYPES}
