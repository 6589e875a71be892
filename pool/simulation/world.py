"""A model of the cluster around one pool, for the simulation and the property tests.

It plays every other actor the planner depends on: the runtime (applying a plan's steps
with the same idempotence and live checks), the kubelet (Pods boot, finish), the exporter
process (registers, goes online, exits after a lease under ExitAndReplace) and the
Jumpstarter lease controller (assigns pending Leases to eligible exporters only). The
planner under test is always the real `pool.rules.planner.plan`. No I/O, no clock:
time is whatever `now` the caller passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from api.labels import selector_matches
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
    RememberBackoff,
    RememberDemand,
    Remove,
    Retain,
    SetSurplusSince,
    Unprotect,
)
from pool.model.keys import instance_labels
from pool.model.views import (
    ClassView,
    ExporterView,
    HookRecord,
    LeaseView,
    Observation,
    PodView,
    PoolView,
    RecycleStrategy,
)
from pool.rules.buckets import AVAILABLE_STATUSES, HOOK_STATUSES, owes_after_lease
from pool.rules.planner import Plan, plan

__all__ = ["Instance", "Request", "World"]


@dataclass
class Instance:
    """An Exporter and the state of its exporter process."""

    name: str
    created: datetime
    enabled: bool = True
    fenced_at: datetime | None = None  # fenced by the pool (FENCED_AT)
    fenced_for: str = ""  # FENCED_FOR
    served: str = ""
    registered: bool = False
    online: bool = False
    status: str = ""
    lease: str = ""
    records_hooks: bool = False
    hooks: HookRecord | None = None
    protected: bool = False  # the lease-protection finalizer
    registered_at: datetime | None = None
    revision: str = ""  # what it was rendered from (REVISION)
    step: int = 0  # the pool's failures in a row at its creation (BACKOFF_STEP)
    standby: bool = False  # STANDBY_LABEL: kept without a Pod
    labels: tuple[tuple[str, str], ...] = ()  # the instance labels it was created with

    def view(self) -> ExporterView:
        return ExporterView(
            name=self.name,
            created=self.created,
            enabled=self.enabled,
            registered=self.registered,
            online=self.online,
            exporter_status=self.status,
            lease_ref=self.lease,
            records_lease_hooks=self.records_hooks,
            hooks=self.hooks,
            served_lease=self.served,
            fenced=self.fenced_at is not None,
            fenced_at=self.fenced_at,
            fenced_for=self.fenced_for,
            protected=self.protected,
            registered_at=self.registered_at,
            revision=self.revision,
            backoff_step=self.step,
            standby=self.standby,
            labels=self.labels,
        )


@dataclass
class Request:
    """A Jumpstarter Lease: requested at `asked`, held for `hold` once assigned."""

    name: str
    asked: datetime
    hold: timedelta
    selector: dict[str, Any] = field(default_factory=dict)
    exporter: str = ""
    assigned: datetime | None = None
    ended: bool = False


@dataclass
class World:
    pool: PoolView
    klass: ClassView | None
    boot: timedelta = timedelta(minutes=2)
    problem: tuple[str, str] | None = None
    instances: dict[str, Instance] = field(default_factory=dict)
    pods: dict[str, tuple[datetime, str]] = field(default_factory=dict)  # name: (since, phase)
    requests: dict[str, Request] = field(default_factory=dict)
    retained: set[str] = field(default_factory=set)
    writes: int = 0
    serial: int = 0  # names generated so far
    lost: int = 0  # Leases Jumpstarter 0.9.0 ended at once: no enabled Exporter matched

    # -- what the planner sees -------------------------------------------------------
    def observe(self) -> Observation:
        return Observation(
            pool=self.pool,
            klass=self.klass,
            exporters=tuple(i.view() for i in self.instances.values()),
            pods=tuple(PodView(n, n, phase) for n, (_, phase) in self.pods.items()),
            leases=tuple(
                LeaseView(r.name, r.selector, r.exporter, r.ended, created=r.asked)
                for r in self.requests.values()
            ),
            problem=self.problem,
        )

    def busy(self, name: str) -> bool:
        """The live check the runtime makes before deleting (Leases read afresh)."""
        inst = self.instances[name]
        leased = any(r.exporter == name and not r.ended for r in self.requests.values())
        return (
            leased
            or bool(inst.lease)
            or inst.status in HOOK_STATUSES
            or owes_after_lease(inst.view())
        )

    # -- the runtime -------------------------------------------------------------------
    def step(self, now: datetime, *, crash_after: int | None = None) -> Plan:
        """One reconcile pass; `crash_after` applies only that many steps (a crash, which
        loses what the process learned of the demand since its last memory write)."""
        result = plan(self.observe(), now)
        steps = result.actions if crash_after is None else result.actions[:crash_after]
        for action in steps:
            self.apply(action, now)
        learned = result.learned if crash_after is None else None
        self.pool = replace(self.pool, learned=learned)
        return result

    def apply(self, action: Action, now: datetime) -> None:
        self.writes += 1
        match action:
            case CreateExporter(prefix, _, step, revision, standby):  # generateName: serial
                self.serial += 1
                name = f"{prefix}{self.serial}"
                made = instance_labels(self.pool.name, self.pool.template_labels)
                labels = tuple(sorted(made.items()))  # STANDBY_LABEL is `standby`
                self.instances[name] = Instance(
                    name, now, revision=revision, step=step, standby=standby, labels=labels
                )
                if not standby:
                    self.pods.setdefault(name, (now, "Pending"))
            case PromoteStandby(name, _, revision, step):
                promoted = self.instances.get(name)
                if promoted is not None and promoted.standby:
                    promoted.standby, promoted.revision = False, revision or promoted.revision
                    promoted.step = step
                    self.pods.setdefault(name, (now, "Pending"))
            case CreatePod(name):
                if name in self.instances:
                    self.pods.setdefault(name, (now, "Pending"))
            case DeletePod(name):
                if self.pods.get(name, (now, ""))[1] in ("Succeeded", "Failed") or (
                    name not in self.instances
                ):
                    self.pods.pop(name, None)
            case Remove(name, fence):
                inst = self.instances.get(name)
                if inst is None or self.busy(name):
                    return  # precondition failed or a Lease took it: not fenced, not deleted
                if fence:  # the delete is a later pass's
                    inst.enabled, inst.fenced_at, inst.fenced_for = False, now, action.fenced_for
                    return
                del self.instances[name]
                self.pods.pop(name, None)
            case LiftFence(name):
                if name in self.instances:
                    inst = self.instances[name]
                    inst.enabled, inst.fenced_at, inst.fenced_for = True, None, ""
            case Retain(name):
                if name in self.instances and not self.busy(name):
                    del self.instances[name]
                    self.pods.pop(name, None)
                    self.retained.add(name)
            case MarkServed(name, lease):
                if name in self.instances:
                    self.instances[name].served = lease
            case Protect(name, _, served):
                if name in self.instances:
                    self.instances[name].protected = True
                    self.instances[name].served = served or self.instances[name].served
            case Unprotect(name):
                if name in self.instances:
                    self.instances[name].protected = False
            case SetSurplusSince(since):
                self.pool = replace(self.pool, surplus_since=since)
            case RememberBackoff(backoff):
                self.pool = replace(self.pool, backoff=backoff)
            case RememberDemand(memory):
                self.pool = replace(self.pool, demand=memory)
            case PatchStatus(status):
                self.pool = replace(self.pool, status=dict(status))

    # -- everything else ---------------------------------------------------------------
    def advance(self, now: datetime) -> None:
        """Kubelet, exporter processes and lease controller catch up to `now`."""
        for name, (since, phase) in list(self.pods.items()):
            inst = self.instances.get(name)
            if phase == "Pending" and now - since >= self.boot and inst is not None:
                self.pods[name] = (since, "Running")
                inst.registered, inst.online, inst.status = True, True, "Available"
                inst.registered_at = since + self.boot
        for request in self.requests.values():
            held = request.assigned is not None and now - request.assigned >= request.hold
            if held and not request.ended:
                self.release(request.name)
        self.assign(now)

    def release(self, lease: str) -> None:
        request = self.requests[lease]
        request.ended = True
        inst = self.instances.get(request.exporter)
        if inst is None or inst.lease != lease:
            return
        inst.lease = ""
        if self.pool.recycle == RecycleStrategy.EXIT_AND_REPLACE:
            inst.online, inst.status = False, "Offline"
            if inst.name in self.pods:
                self.pods[inst.name] = (self.pods[inst.name][0], "Succeeded")
        else:
            inst.status = "Available"
        if inst.hooks is not None:
            inst.hooks = replace(inst.hooks, after_phase="Succeeded")

    def assign(self, now: datetime) -> None:
        """The lease controller: oldest pending Lease first, eligible exporters only."""
        labels = instance_labels(self.pool.name, self.pool.template_labels)
        pending = sorted(
            (r for r in self.requests.values() if not r.exporter and not r.ended),
            key=lambda r: r.asked,
        )
        eligible = [
            i
            for i in self.instances.values()
            if i.enabled
            and i.registered
            and i.online
            and i.status in AVAILABLE_STATUSES
            and not i.lease
            and not owes_after_lease(i.view())
            and not any(r.exporter == i.name and not r.ended for r in self.requests.values())
        ]
        for request in pending:
            if not selector_matches(request.selector, labels):
                continue
            if not any(i.enabled for i in self.instances.values()):
                request.ended = True  # 0.9.0: NoAccess (none match) or AllDisabled
                self.lost += 1
                continue
            if not eligible:
                continue
            inst = eligible.pop(0)
            request.exporter, request.assigned = inst.name, now
            inst.lease, inst.status = request.name, "LeaseReady"
            if inst.records_hooks:
                inst.hooks = HookRecord(request.name, request.name, "Succeeded", None)

    def request(self, name: str, now: datetime, hold: timedelta) -> None:
        self.requests[name] = Request(name, now, hold)
