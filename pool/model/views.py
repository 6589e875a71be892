"""What the planner sees: small frozen views of the objects of one pool.

The planner does not read generated models or raw API dicts; `pool.model.adapt`
builds these views from raw objects (applying the documented schema defaults), and the
simulation builds them directly. Keeping them small keeps the planner fast at 10,000
exporters and independent of the generated models' nested class names. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from api.warmbuffer import WarmBufferSettings
from pool.model.access import Resource
from pool.model.backoff import Backoff
from pool.model.demand import DemandMemory
from pool.model.status import ConditionSpec

__all__ = [
    "BindingMode",
    "ClassView",
    "ExporterView",
    "HookRecord",
    "LeaseView",
    "Observation",
    "PodView",
    "PoolClaim",
    "PoolView",
    "ProvisionedView",
    "ReclaimPolicy",
    "RecycleStrategy",
    "StepFailure",
]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class RecycleStrategy:
    EXIT_AND_REPLACE = "ExitAndReplace"
    IN_PLACE_REUSE = "InPlaceReuse"


class BindingMode:
    IMMEDIATE = "Immediate"
    WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


class ReclaimPolicy:
    DELETE = "Delete"
    RETAIN = "Retain"


@dataclass(frozen=True, slots=True)
class HookRecord:
    """`status.leaseHooks` of an Exporter: how far the hooks of its latest lease got."""

    lease_name: str = ""
    lease_uid: str = ""
    before_phase: str | None = None  # None: unset (the hook has not started)
    after_phase: str | None = None


@dataclass(frozen=True, slots=True)
class ExporterView:
    """One owned Exporter (controller ownerReference to the set)."""

    name: str
    created: datetime
    deleting: bool = False
    enabled: bool = True
    registered: bool = False
    online: bool = False
    exporter_status: str = ""
    lease_ref: str = ""
    records_lease_hooks: bool = False
    hooks: HookRecord | None = None
    served_lease: str = ""  # annotation SERVED_LEASE
    fenced: bool = False  # annotation FENCED_AT: disabled by the pool, not by a person
    fenced_at: datetime | None = None  # its time (None: unreadable, as if long settled)
    fenced_for: str = ""  # annotation FENCED_FOR: "<Event reason>: <why>"
    uid: str = ""  # "" only in hand-built views (simulation, tests): the name stands in
    # When its exporter last showed it had registered (`pool.model.adapt.registered_at`):
    # Registered's lastTransitionTime while True; once False, `status.lastSeen`.
    registered_at: datetime | None = None
    backoff_step: int = 0  # annotation BACKOFF_STEP: the pool's failures before its creation
    revision: str = ""  # annotation REVISION: "" (none recorded) counts as the current one
    protected: bool = False  # finalizer LEASE_PROTECTION (`pool.rules.protection`)
    deleted_at: datetime | None = None  # metadata.deletionTimestamp
    standby: bool = False  # label STANDBY_LABEL: kept without a Pod (`stages.standby`)
    # Its labels, sorted; () only in hand-built views, which carry their pool's labels.
    labels: tuple[tuple[str, str], ...] = ()

    def carries(self, labels: Mapping[str, str]) -> bool:
        """Whether it has every one of `labels` (a Lease selecting them could match it)."""
        if not self.labels:
            return True
        own = dict(self.labels)
        return all(own.get(k) == v for k, v in labels.items())

    @property
    def identity(self) -> str:
        """What an instance's Pods are matched by: the uid (names may be reused)."""
        return self.uid or self.name

    @property
    def fence_reason(self) -> tuple[str, str]:
        """(Event reason, why) of the removal the pool fenced it for (`Remove.fenced_for`)."""
        reason, _, why = self.fenced_for.partition(": ")
        return reason, why


@dataclass(frozen=True, slots=True)
class PodView:
    """A Pod labelled for the set; it belongs to the instance whose Exporter uid its
    controller ownerReference names (`owner_uid`), and to no other of the same name."""

    name: str
    exporter: str  # the owner's name, for messages only
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    owner_uid: str = ""  # "" only in hand-built views: `exporter` stands in
    uid: str = ""
    deleting: bool = False  # metadata.deletionTimestamp set
    created: datetime | None = None
    # When the deletion was asked for: deletionTimestamp - deletionGracePeriodSeconds, the
    # earliest of the Pod's events (a later, shorter delete moves it: `adapt.pod_view_after`).
    delete_requested: datetime | None = None
    # The exporter container (`jmp run`): exited, with its code, message and end time.
    exited: bool = False
    exit_code: int | None = None
    finished_at: datetime | None = None
    message: str = ""  # termination message (the log tail on error), else the Pod's reason
    backoff_step: int = 0  # annotation BACKOFF_STEP
    node: str = ""  # spec.nodeName: "" until it is scheduled

    @property
    def owner(self) -> str:
        return self.owner_uid or self.exporter

    @property
    def done(self) -> bool:
        """Finished, or its exporter has exited (the sidecar may still be stopping). A Pod
        being deleted counts only if its exporter ended before the deletion was asked
        for: one deleted while it ran (by hand, an eviction, a drain) ends because of the
        deletion, and is `going`, not finished."""
        ended = self.phase in ("Succeeded", "Failed") or self.exited
        if not ended or not self.deleting:
            return ended
        at, asked = self.finished_at, self.delete_requested
        return at is not None and asked is not None and at < asked

    @property
    def going(self) -> bool:
        """Being deleted, and not finished before that: its instance waits for a new Pod."""
        return self.deleting and not self.done


@dataclass(frozen=True, slots=True)
class ProvisionedView:
    """An object of one instance of a resource its provisioner watches
    (`Provisioner.watches`), labelled with the set and the instance (`INSTANCE_LABEL`);
    also what a provisioner's `cleanup` names for deletion."""

    resource: Resource
    name: str
    instance: str  # the Exporter's name
    uid: str = ""  # "" in a reference built by name: the delete has no uid precondition
    deleting: bool = False  # metadata.deletionTimestamp set
    # Where it lives when not in the set's namespace here: the target cluster's namespace
    # (`Provisioner.remote`) and the target's name in the runtime ("" on this cluster).
    namespace: str = ""
    target: str = ""
    failure: str = ""  # why it can serve no lease (`Remote.failure`); "" while it can


@dataclass(frozen=True, slots=True)
class LeaseView:
    """A Jumpstarter Lease in the set's namespace."""

    name: str
    selector: Mapping[str, Any]
    exporter: str = ""  # status.exporterRef.name, "" while unassigned
    ended: bool = False
    created: datetime | None = None  # metadata.creationTimestamp: when it arrived
    begin: datetime | None = None  # spec.beginTime: a lease booked for later


@dataclass(frozen=True, slots=True)
class PoolView:
    """The ExporterSet, its spec with schema defaults applied."""

    name: str
    namespace: str
    generation: int
    min_replicas: int
    max_replicas: int  # 0: no ceiling
    min_available: int
    cooldown: timedelta
    recycle: str
    template_labels: Mapping[str, str]
    selector: Mapping[str, Any] | None = None
    surplus_since: datetime | None = None
    backoff: Backoff | None = None  # the pool's memory of its failures (BACKOFF)
    status: Mapping[str, Any] = field(default_factory=dict)
    revision: str = ""  # of the spec an instance is rendered from (`adapt.revision`)
    created: datetime | None = None  # metadata.creationTimestamp (`pool.rules.claims`)
    # the warm-buffer annotations (`api.warmbuffer`) and what the pool learned of its demand
    sizing: WarmBufferSettings = field(default_factory=WarmBufferSettings)
    demand: DemandMemory | None = None
    # what this process learned since (`Plan.learned` of its last pass): the arrivals of
    # Leases deleted before the memory's next write (an ended Lease goes with its
    # recycled Exporter) are kept; never written, so a restart loses at most a minute
    learned: DemandMemory | None = None
    rollout_paused: bool = False  # annotation ROLLOUT is `paused`
    legacy_revision: str = ""  # the same spec's digest as earlier versions computed it


@dataclass(frozen=True, slots=True)
class ClassView:
    """The parts of the VirtualTargetClass that shape the pool (defaults applied)."""

    name: str
    binding_mode: str
    reclaim_policy: str
    revision: str = ""  # of the class's spec (`adapt.revision`)
    legacy_revision: str = ""  # the same spec's digest as earlier versions computed it


@dataclass(frozen=True, slots=True)
class PoolClaim:
    """A set as the claim rule of pending Leases sees it (`pool.rules.claims`): its
    name, age, selector and instances' labels."""

    name: str
    created: datetime | None
    labels: Mapping[str, str]
    selector: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def seniority(self) -> tuple[datetime, str]:
        """The sort key of the rule: older first, then by name."""
        return self.created or _EPOCH, self.name


@dataclass(frozen=True, slots=True)
class StepFailure:
    """A step of the last pass that failed for a reason that will not go away by itself
    (`reconciler.runtime.failures`): `reason` names it (RenderFailed, WriteRejected), `step` is
    the step in the log's words with its instance, `message` the error, trimmed."""

    reason: str
    step: str
    message: str

    def __str__(self) -> str:
        return f"{self.step}: {self.message}"


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything one planning pass of one set needs.

    `problem` is a (reason, message) pair when the set cannot be scaled (class missing,
    class of another provisioner, invalid merged parameters); `awaiting` names the owned
    instances that cannot be rendered yet, with the reason (Jumpstarter's controller has
    not issued their credentials, a CA bundle is missing): they get no config Secret and
    no Pod until then. `images` is the `ImagesAllowed` condition when an image allow-list
    is in force (`pool.rendering.imagecheck`); while it is False no instance and no
    Pod is created, and those that exist stay. `failure` is a step of this pass that
    failed: the status then says so (Degraded). `rivals` are the other sets of the
    namespace, not being deleted, for the claim rule of pending Leases
    (`pool.rules.claims`). `lost_nodes` are the nodes that stopped answering or
    report NotReady: an instance whose every Pod is on one serves nothing more.
    `provisioned` are the objects of the provisioner's own resources
    (`Provisioner.watches`) by instance (Exporter name); none for QEMU.
    """

    pool: PoolView
    klass: ClassView | None
    exporters: tuple[ExporterView, ...] = ()
    pods: tuple[PodView, ...] = ()
    leases: tuple[LeaseView, ...] = ()
    problem: tuple[str, str] | None = None
    awaiting: Mapping[str, str] = field(default_factory=dict)
    images: ConditionSpec | None = None
    # Writes of this process the caches have not shown yet (`reconciler.runtime.expectations`):
    # Exporters created (their names) and instances whose Pod was created (identities).
    expected_exporters: frozenset[str] = frozenset()
    expected_pods: frozenset[str] = frozenset()
    failure: StepFailure | None = None
    rivals: tuple[PoolClaim, ...] = ()
    # The nodes the instances' Pods are on that are lost (`pool.model.nodes`), each with
    # what was seen of it; empty where Nodes cannot be read (a namespaced install).
    lost_nodes: Mapping[str, str] = field(default_factory=dict)
    provisioned: Mapping[str, tuple[ProvisionedView, ...]] = field(default_factory=dict)
