"""Where the planner and the types of its input and output live.

The corpus names types by class name only; this table says which module holds each, so
the codec reads and writes the same JSON whatever the package layout.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

PLANNER = "pool.rules.planner:plan"

TYPES = (
    "pool.model.views:Observation",
    "pool.model.views:PoolView",
    "pool.model.views:ClassView",
    "pool.model.views:ExporterView",
    "pool.model.views:HookRecord",
    "pool.model.views:PodView",
    "pool.model.views:LeaseView",
    "pool.model.views:StepFailure",
    "pool.model.views:PoolClaim",
    "pool.model.status:ConditionSpec",
    "pool.model.backoff:Backoff",
    "pool.model.demand:DemandMemory",
    "api.warmbuffer:WarmBufferSettings",
    "pool.rules.demand:Estimate",
    "pool.rules.buckets:Bucket",
    "pool.rules.planner:Plan",
    "pool.rules.steps:Wait",
    "pool.model.actions:CreateExporter",
    "pool.model.actions:CreatePod",
    "pool.model.actions:DeletePod",
    "pool.model.actions:Remove",
    "pool.model.actions:Retain",
    "pool.model.actions:MarkServed",
    "pool.model.actions:Protect",
    "pool.model.actions:Unprotect",
    "pool.model.actions:SetSurplusSince",
    "pool.model.actions:RememberBackoff",
    "pool.model.actions:RememberDemand",
    "pool.model.actions:PatchStatus",
    "pool.model.actions:RecordEvent",
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
