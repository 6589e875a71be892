"""Where the planner and the types of its input and output live.

The corpus names types by class name only; this table says which module holds each, so
the codec reads and writes the same JSON whatever the package layout.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

PLANNER = "reconciler.rules.planner:plan"

TYPES = (
    "reconciler.model.views:Observation",
    "reconciler.model.views:PoolView",
    "reconciler.model.views:ClassView",
    "reconciler.model.views:ExporterView",
    "reconciler.model.views:HookRecord",
    "reconciler.model.views:PodView",
    "reconciler.model.views:LeaseView",
    "reconciler.model.views:StepFailure",
    "reconciler.model.views:PoolClaim",
    "reconciler.model.status:ConditionSpec",
    "reconciler.model.backoff:Backoff",
    "reconciler.model.demand:DemandMemory",
    "api.warmbuffer:WarmBufferSettings",
    "reconciler.rules.demand:Estimate",
    "reconciler.rules.buckets:Bucket",
    "reconciler.rules.planner:Plan",
    "reconciler.rules.steps:Wait",
    "reconciler.model.actions:CreateExporter",
    "reconciler.model.actions:CreatePod",
    "reconciler.model.actions:DeletePod",
    "reconciler.model.actions:Remove",
    "reconciler.model.actions:Retain",
    "reconciler.model.actions:MarkServed",
    "reconciler.model.actions:Protect",
    "reconciler.model.actions:Unprotect",
    "reconciler.model.actions:SetSurplusSince",
    "reconciler.model.actions:RememberBackoff",
    "reconciler.model.actions:RememberDemand",
    "reconciler.model.actions:PatchStatus",
    "reconciler.model.actions:RecordEvent",
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
