"""Planner stage, status: the set's counters and four conditions, computed from what the
earlier stages found, and written only when they differ from the observed status (with
the Events of the conditions that changed, `pool.rules.transitions`).

Counters (the ExporterSet document leaves some overlap to the implementer), of instances:
the standby Exporter (`pool.rules.stages.standby`) is none, and the Available condition
names it instead:
- `replicas`: every owned Exporter, draining and terminating included;
- `availableReplicas`: the available bucket (the lease controller's eligibility);
- `readyReplicas`: Registered and Online; `unavailableReplicas`: enabled and not ready;
- `leasedReplicas`: a live Lease or `status.leaseRef` names it;
- `exportersActive`: the busy bucket (serving a lease, its hooks included);
- `exportersIdle`: online, enabled and not leased; `exportersOffline`: enabled, not
  online; `exportersDisabled`: `spec.enabled == false`;
- `pods*`: the set's Pods by phase, Succeeded counted with Unknown as the document says;
  but a Pod of a failed instance (`pool.rules.backoff.failed`) counts in `podsFailed`
  whatever its phase, and a Running Pod whose exporter exited, or one on a lost node
  (`pool.model.nodes`: what it runs is unknown), in `podsUnknown`; `readyReplicas`
  leaves out instances whose Pods have all ended or are all on lost nodes.

Conditions: Available (the warm buffer met), Progressing (scaling, booting, recycling,
waiting for credentials or a cooldown), Degraded (a problem, failing instances,
instances on lost nodes) and ScalingLimited (the ceiling, or a problem that stops
scaling); the README's table "Condition reasons" says when each reason is set. No I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from api.labels import selector_string
from pool.model.actions import PatchStatus
from pool.model.keys import SET_LABEL
from pool.model.reasons import (
    ALL_HEALTHY,
    ALL_READY,
    AT_MAX,
    MINIMUM_AVAILABLE,
    MINIMUM_UNAVAILABLE,
    NO_REPLICAS_REQUIRED,
    PODS_STARTING,
    RECYCLING,
    REPLICAS_NOT_READY,
    ROLLING_OUT,
    ROLLOUT_PAUSED,
    SCALING_DOWN,
    SCALING_UP,
    WAIT_FOR_FIRST_CONSUMER,
    WAITING_FOR_CREDENTIALS,
    WITHIN_LIMITS,
)
from pool.model.status import ConditionSpec, Counters, build_status
from pool.model.views import ExporterView, Observation
from pool.rules.backoff import failed
from pool.rules.buckets import Bucket, is_leased, is_ready, pods_finished, pods_lost
from pool.rules.stages.census import Census
from pool.rules.stages.notes import Notes
from pool.rules.stages.size import Size
from pool.rules.steps import Steps
from pool.rules.transitions import transition_events

__all__ = ["Status", "status"]


@dataclass(slots=True)
class Status:
    status: Mapping[str, object]
    steps: Steps  # the write and its Events, when the status changed


def status(obs: Observation, now: datetime, counted: Census, sized: Size, told: Notes) -> Status:
    pool = obs.pool
    selector = (
        pool.selector if pool.selector is not None else {"matchLabels": {SET_LABEL: pool.name}}
    )
    conditions = _conditions(obs, counted, sized, told)
    images = [obs.images] if obs.images is not None else []
    written = build_status(
        _counters(obs, counted),
        selector_string(selector),
        conditions + images,
        pool.status,
        pool.generation,
        now,
    )
    if written == dict(pool.status):
        return Status(written, Steps())
    # The Events follow the write: they tell what the status now says.
    return Status(written, Steps((PatchStatus(written), *transition_events(pool.status, written))))


def _counters(obs: Observation, counted: Census) -> Counters:
    standby = {e.name for e in counted.members[Bucket.STANDBY]}  # no instance: not counted
    exporters, pods_of = [e for e in obs.exporters if e.name not in standby], counted.pods_of
    leased_by = {lease.exporter for lease in obs.leases if lease.exporter and not lease.ended}
    live = [e for e in exporters if not e.deleting]
    by_identity = {e.identity: e for e in exporters}
    phases: dict[str, int] = defaultdict(int)
    for pod in obs.pods:
        owner = by_identity.get(pod.owner)
        if pod.node in obs.lost_nodes and not pod.done:
            phases["Unknown"] += 1  # on a lost node: what it runs, if anything, is unknown
        elif pod.going and pod.phase == "Failed":
            phases["Unknown"] += 1  # ended because it was deleted: it did not fail
        elif pod.phase == "Failed" or (owner is not None and failed(owner, pod)):
            phases["Failed"] += 1
        elif pod.phase == "Running" and pod.exited:
            phases["Unknown"] += 1  # the exporter exited; the sidecar is stopping
        else:
            phases[pod.phase] += 1

    def ready(e: ExporterView) -> bool:
        pods = tuple(pods_of.get(e.identity, ()))
        return is_ready(e) and not pods_finished(pods) and not pods_lost(pods, obs.lost_nodes)

    return Counters(
        replicas=len(exporters),
        available=len(counted.members[Bucket.AVAILABLE]),
        ready=sum(1 for e in live if ready(e)),
        unavailable=sum(1 for e in live if e.enabled and not ready(e)),
        leased=sum(1 for e in exporters if is_leased(e, leased_by)),
        active=len(counted.members[Bucket.BUSY]),
        idle=sum(1 for e in live if e.online and e.enabled and not is_leased(e, leased_by)),
        offline=sum(1 for e in live if e.enabled and not e.online),
        disabled=sum(1 for e in exporters if not e.enabled),
        pods_pending=phases["Pending"],
        pods_running=phases["Running"],
        pods_failed=phases["Failed"],
        pods_unknown=phases["Unknown"] + phases["Succeeded"],
    )


def _conditions(obs: Observation, counted: Census, sized: Size, told: Notes) -> list[ConditionSpec]:
    count, warm = counted.count, sized.warm
    available = count[Bucket.AVAILABLE]
    if obs.problem is not None:
        reason, message = obs.problem
        return [
            ConditionSpec("Available", available >= warm and available > 0, reason, message),
            ConditionSpec("Progressing", False, reason, "scaling stopped: " + message),
            ConditionSpec("Degraded", True, reason, message),
            ConditionSpec("ScalingLimited", True, reason, "scaling stopped: " + message),
        ]
    limited = (
        ConditionSpec("ScalingLimited", True, AT_MAX, told.ceiling)
        if told.ceiling
        else ConditionSpec(
            "ScalingLimited", False, WITHIN_LIMITS, "within minReplicas and maxReplicas"
        )
    )
    degraded = (
        ConditionSpec("Degraded", True, *told.degraded)
        if told.degraded[0]
        else ConditionSpec("Degraded", False, ALL_HEALTHY, "")
    )
    standbys = counted.members[Bucket.STANDBY]
    kept = _standby_note(standbys[0].name) if standbys else ""
    return [
        _available(available, warm, sized.wffc, sized.why_warm, kept),
        _progressing(obs, counted, sized, told),
        degraded,
        limited,
    ]


def _standby_note(name: str) -> str:
    return f"; standby Exporter {name} keeps Leases pending until an instance boots"


def _available(
    available: int, warm: int, wffc: bool, why: str = "", standby: str = ""
) -> ConditionSpec:
    ready = f"{available} of {warm} warm instance(s) ready" + (f" ({why})" if why else "")
    ready += standby
    if wffc:
        return ConditionSpec(
            "Available",
            True,
            WAIT_FOR_FIRST_CONSUMER,
            "instances are created on lease request" + standby,
        )
    if warm == 0:
        return ConditionSpec("Available", True, NO_REPLICAS_REQUIRED, ready)
    if available >= warm:
        return ConditionSpec("Available", True, MINIMUM_AVAILABLE, ready)
    return ConditionSpec("Available", False, MINIMUM_UNAVAILABLE, ready)


def _progressing(obs: Observation, counted: Census, sized: Size, told: Notes) -> ConditionSpec:
    reason, message = told.scale
    provisioning, leaving = counted.count[Bucket.PROVISIONING], counted.leaving
    if reason in (SCALING_UP, SCALING_DOWN, WAITING_FOR_CREDENTIALS, ROLLING_OUT):
        return ConditionSpec("Progressing", True, reason, message)
    if reason == ROLLOUT_PAUSED:
        return ConditionSpec("Progressing", False, reason, message)
    if provisioning or leaving:
        pending = any(p.phase == "Pending" and not p.deleting for p in obs.pods)
        booting = PODS_STARTING if pending else REPLICAS_NOT_READY
        return ConditionSpec(
            "Progressing",
            True,
            booting if provisioning else RECYCLING,
            f"{provisioning} provisioning, {leaving} leaving",
        )
    if reason:
        return ConditionSpec("Progressing", False, reason, message)
    return ConditionSpec("Progressing", False, ALL_READY, f"{sized.desired} instance(s) desired")
