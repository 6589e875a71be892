"""The steps a plan asks the runtime to take, as plain frozen values.

Each step is idempotent when replayed ("already exists" and "not found" are success,
deletes carry uids), and a create, whose name the apiserver generates, is remembered until
the cache shows it (`reconciler.runtime.expectations`), so a crash between two steps, or a
plan made from a cache that lags behind the last writes, never leaves duplicates. No I/O.

The steps that change the pool carry `why`, a short reason in the planner's words
("warm buffer 2, available 0"): the reconciler logs it and puts it in its Events, and
`virtualtarget plan` prints it, so all three say the same thing. It is commentary, not
part of the step: two steps doing the same thing are equal whatever they give as reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pool.model.backoff import Backoff
from pool.model.demand import DemandMemory
from pool.model.reasons import RECYCLE
from pool.model.views import ProvisionedView

__all__ = [
    "Action",
    "CreateExporter",
    "CreatePod",
    "DeletePod",
    "LiftFence",
    "MarkServed",
    "PatchStatus",
    "PromoteStandby",
    "Protect",
    "RecordEvent",
    "RememberBackoff",
    "RememberDemand",
    "Remove",
    "Retain",
    "SetSurplusSince",
    "Unprotect",
]


@dataclass(frozen=True, slots=True)
class CreateExporter:
    """Create an Exporter named `generateName: <name>` (rendered from the set, `name` the
    prefix: the apiserver completes it, so no name is ever reused). Its config Secret and
    Pod follow
    once Jumpstarter's controller has issued its credentials (`CreatePod`). `step` is the
    pool's failures in a row (BACKOFF_STEP), 0 when healthy; `revision` that of the spec
    and class it is rendered from (REVISION). A `standby` carries STANDBY_LABEL and gets
    no Pod (`pool.rules.stages.standby`)."""

    name: str
    why: str = field(default="", compare=False)
    step: int = 0
    revision: str = field(default="", compare=False)
    standby: bool = False


@dataclass(frozen=True, slots=True)
class PromoteStandby:
    """Make the standby Exporter `name` an instance: take STANDBY_LABEL off (and stamp the
    revision it now renders); its Pod follows as for any credentialed instance. Stands in
    for one `CreateExporter`: Jumpstarter already sees it, and its credentials are there."""

    name: str
    why: str = field(default="", compare=False)
    revision: str = field(default="", compare=False)
    step: int = 0  # as `CreateExporter.step`: the probe of a failing pool carries it


@dataclass(frozen=True, slots=True)
class CreatePod:
    """Create the missing workload Pod of an existing, credentialed Exporter, after
    bringing its config Secret up to date."""

    exporter: str
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class DeletePod:
    """Delete the Pod `uid` (a precondition: never a newer Pod of that name), which has
    finished or belongs to no instance of the pool (checked live first)."""

    name: str
    why: str = field(default="", compare=False)
    uid: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Remove:
    """Take an instance out, in two passes. With `fence`: fence it (`enabled=false`,
    FENCED_AT, and FENCED_FOR carrying `event` and `why` to the pass that deletes) and
    stop there. Without: read the Leases live and, only if none holds it, delete what
    its provisioner's `cleanup` names of `provisioned`, its Exporter, then its Pods. A
    pool's fence settles before its delete (`pool.rules.stages.settle`). Each delete
    carries the uid it was planned for."""

    name: str
    fence: bool
    why: str = field(default="", compare=False)
    uid: str = field(default="", compare=False)
    pods: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # (name, uid)
    event: str = field(default=RECYCLE, compare=False)  # the Event's reason (ScaleDown)
    # its objects of the provisioner's own resources, as observed (`Observation.provisioned`)
    provisioned: tuple[ProvisionedView, ...] = field(default=(), compare=False)

    @property
    def fenced_for(self) -> str:
        """What its fence writes in FENCED_FOR (`ExporterView.fence_reason` reads it)."""
        return f"{self.event}: {self.why}"


@dataclass(frozen=True, slots=True)
class LiftFence:
    """Enable an instance the pool fenced and take FENCED_AT and FENCED_FOR off: a Lease
    took it before its removal (a pick made from a read before the fence)."""

    name: str
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Retain:
    """reclaimPolicy Retain: fence the released instance and detach it from the set
    (Pod relabelled first, then the Exporter loses its ownerReference and set label)."""

    name: str
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class MarkServed:
    """Annotate an Exporter with the first Lease seen on it (SERVED_LEASE)."""

    name: str
    lease: str


@dataclass(frozen=True, slots=True)
class Protect:
    """Add the LEASE_PROTECTION finalizer to a busy instance
    (`pool.rules.protection`), and with `served` also its SERVED_LEASE annotation
    (one write for both). Conditional on the resourceVersion the plan saw: a changed
    instance is planned again."""

    name: str
    why: str = field(default="", compare=False)
    served: str = ""


@dataclass(frozen=True, slots=True)
class Unprotect:
    """Take the LEASE_PROTECTION finalizer off an instance no lease holds any more (or
    one held past the bound: `warning`, and an Event says so). A deleted instance then
    goes."""

    name: str
    why: str = field(default="", compare=False)
    warning: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class SetSurplusSince:
    """Write (or, with None, remove) SURPLUS_SINCE where the pool keeps memory: an
    annotation of the set, or its memory Lease (`reconciler.runtime.memory`)."""

    since: datetime | None
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class RememberBackoff:
    """Write (or, with None, remove) the pool's backoff (BACKOFF) where it keeps memory:
    an annotation of the set, or its memory Lease (`reconciler.runtime.memory`)."""

    backoff: Backoff | None
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class RememberDemand:
    """Write what a `warm-buffer: auto` pool learned of its demand (DEMAND) where it keeps
    memory: an annotation of the set, or its memory Lease (`reconciler.runtime.memory`)."""

    memory: DemandMemory
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class PatchStatus:
    """Replace the set's status (only planned when it differs from the observed one)."""

    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """An Event on the set about a state it entered (planned once, on the transition)."""

    reason: str
    note: str
    warning: bool = False


Action = (
    CreateExporter
    | PromoteStandby
    | CreatePod
    | DeletePod
    | Remove
    | LiftFence
    | Retain
    | MarkServed
    | Protect
    | Unprotect
    | SetSurplusSince
    | RememberBackoff
    | RememberDemand
    | PatchStatus
    | RecordEvent
)
