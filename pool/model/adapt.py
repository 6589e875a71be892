"""Raw API objects (plain dicts, as the API returns them) to the planner's views.

The thin layer between the runtime's caches and the pure planner: it reads only the
fields the pool semantics need, applies the documented schema defaults, and never
raises on a malformed foreign object (a field of the wrong type reads as absent).

Assumptions about Jumpstarter Leases (`jumpstarter.dev/v1alpha1`, kind Lease), the only
fields read: `spec.selector` (a label selector matched against exporter labels),
`status.exporterRef.name` once an exporter is assigned, `status.ended` (bool),
`metadata.creationTimestamp` (when demand arrived) and `spec.beginTime` (a lease booked
for later: the begin the client asked for, `begin_time` of Jumpstarter 0.9.0's client
`Lease`; `status.beginTime` is when it actually began, so it is not read). No I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from api.duration import parse_go_duration
from api.warmbuffer import settings_of
from pool.model.access import Resource
from pool.model.backoff import decode
from pool.model.defaults import spec_defaults
from pool.model.demand import decode_demand
from pool.model.jumpstarter import EXPORTER_CONTAINER
from pool.model.keys import (
    BACKOFF,
    BACKOFF_STEP,
    DEMAND,
    FENCED_AT,
    FENCED_FOR,
    INSTANCE_LABEL,
    LEASE_PROTECTION,
    LEGACY_SURPLUS_SINCE,
    REVISION,
    ROLLOUT,
    ROLLOUT_PAUSED,
    SERVED_LEASE,
    STANDBY_LABEL,
    SURPLUS_SINCE,
    instance_labels,
)
from pool.model.reasons import INVALID_SPEC
from pool.model.status import condition_of
from pool.model.timefmt import parse_time
from pool.model.views import (
    ClassView,
    ExporterView,
    HookRecord,
    LeaseView,
    PodView,
    PoolClaim,
    PoolView,
    ProvisionedView,
)

__all__ = [
    "class_view",
    "controller_of",
    "exporter_view",
    "lease_view",
    "pod_exited",
    "pod_owner",
    "pod_view",
    "pod_view_after",
    "pool_claim",
    "pool_view",
    "provisioned_view",
    "remembered",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def controller_of(obj: Mapping[str, Any]) -> str:
    """The uid of the object's controller ownerReference, "" when it has none."""
    for ref in _map(obj.get("metadata")).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return _str(ref.get("uid"))
    return ""


# Spec fields of a set that scale the pool and shape nothing an instance is rendered from:
# editing them is no repair and no rollout, so they leave the revision (and the backoff)
# as it is. The selector renders nothing either (it must match the template's labels).
_SCALING = frozenset(
    {"minReplicas", "maxReplicas", "minAvailableReplicas", "scaleDownCooldown", "recycleStrategy"}
)
_SET_UNRENDERED = _SCALING | {"selector"}
# Fields of a class that decide when instances are made and kept, not what they are.
_CLASS_UNRENDERED = frozenset({"bindingMode", "reclaimPolicy"})


def revision(spec: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> str:
    """A short digest of a spec (its `skip` fields left out): equal specs, equal digests,
    whichever process computes them."""
    kept = {k: v for k, v in spec.items() if k not in skip}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def remembered(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """The pool's memory in these annotations (the set's, or its memory Lease's), as
    PoolView fields: since when it has had a surplus, and its backoff."""
    return {
        "surplus_since": _time(annotations.get(SURPLUS_SINCE))
        or _time(annotations.get(LEGACY_SURPLUS_SINCE)),
        "backoff": decode(annotations.get(BACKOFF)),
        "demand": decode_demand(annotations.get(DEMAND)),
    }


def pool_view(obj: Mapping[str, Any]) -> tuple[PoolView, tuple[str, str] | None]:
    """The set as the planner sees it, and a (reason, message) problem if its spec is unusable."""
    meta, spec = _map(obj.get("metadata")), _map(obj.get("spec"))
    annotations = _map(meta.get("annotations"))
    merged = {**spec_defaults("ExporterSet"), **spec}
    problem = None
    try:
        cooldown = parse_go_duration(str(merged["scaleDownCooldown"]))
        if cooldown < timedelta(0):
            raise ValueError("must not be negative")
    except ValueError as exc:
        cooldown = timedelta(0)
        problem = (INVALID_SPEC, f"spec.scaleDownCooldown: {exc}")
    labels = _map(_map(_map(spec.get("template")).get("metadata")).get("labels"))
    selector = spec.get("selector")
    view = PoolView(
        name=_str(meta.get("name")),
        namespace=_str(meta.get("namespace")),
        generation=int(meta.get("generation") or 0),
        min_replicas=int(merged["minReplicas"]),
        max_replicas=int(merged["maxReplicas"]),
        min_available=int(merged["minAvailableReplicas"]),
        cooldown=cooldown,
        recycle=str(merged["recycleStrategy"]),
        template_labels={str(k): str(v) for k, v in labels.items()},
        selector=selector if isinstance(selector, Mapping) else None,
        status=_map(obj.get("status")),
        revision=revision(spec, _SET_UNRENDERED),
        created=_time(meta.get("creationTimestamp")),
        sizing=settings_of(annotations),
        rollout_paused=annotations.get(ROLLOUT) == ROLLOUT_PAUSED,
        legacy_revision=revision(spec, _SCALING),
        **remembered(annotations),
    )
    return view, problem


def class_view(obj: Mapping[str, Any]) -> ClassView:
    spec = {**spec_defaults("VirtualTargetClass"), **_map(obj.get("spec"))}
    return ClassView(
        name=_str(_map(obj.get("metadata")).get("name")),
        binding_mode=str(spec["bindingMode"]),
        reclaim_policy=str(spec["reclaimPolicy"]),
        revision=revision(_map(obj.get("spec")), _CLASS_UNRENDERED),
        legacy_revision=revision(_map(obj.get("spec"))),
    )


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return condition_of(status, kind).get("status") == "True"


def _step(annotations: Mapping[str, Any]) -> int:
    value = annotations.get(BACKOFF_STEP)
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _hooks(status: Mapping[str, Any]) -> HookRecord | None:
    record = status.get("leaseHooks")
    if not isinstance(record, Mapping):
        return None
    before, after = record.get("beforeLease"), record.get("afterLease")
    return HookRecord(
        lease_name=_str(_map(record.get("leaseRef")).get("name")),
        lease_uid=_str(record.get("leaseUID")),
        before_phase=_str(before.get("phase")) if isinstance(before, Mapping) else None,
        after_phase=_str(after.get("phase")) if isinstance(after, Mapping) else None,
    )


def registered_at(status: Mapping[str, Any]) -> datetime | None:
    """When the exporter last showed it had registered: while Registered is True, that
    condition's last transition; once it is False, `status.lastSeen`, the last word of an
    exporter that registered and then unregistered (it reports only after Register). None
    for one that never did: Jumpstarter's controller writes Registered False ("Unregister")
    on an Exporter's first reconcile, so a False transition alone says nothing; and
    `lastSeen` moves on every report while registered, so it is read only once False."""
    if _condition_true(status, "Registered"):
        return _time(condition_of(status, "Registered").get("lastTransitionTime"))
    return _time(status.get("lastSeen"))


def exporter_view(obj: Mapping[str, Any]) -> ExporterView:
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    annotations = _map(meta.get("annotations"))
    return ExporterView(
        name=_str(meta.get("name")),
        created=_time(meta.get("creationTimestamp")) or _EPOCH,
        deleting=bool(meta.get("deletionTimestamp")),
        enabled=spec.get("enabled") is not False,
        registered=_condition_true(status, "Registered"),
        online=_condition_true(status, "Online"),
        exporter_status=_str(status.get("exporterStatus")),
        lease_ref=_str(_map(status.get("leaseRef")).get("name")),
        records_lease_hooks=status.get("recordsLeaseHooks") is True,
        hooks=_hooks(status),
        served_lease=_str(annotations.get(SERVED_LEASE)),
        fenced=FENCED_AT in annotations,
        fenced_at=_time(annotations.get(FENCED_AT)),
        fenced_for=_str(annotations.get(FENCED_FOR)),
        uid=_str(meta.get("uid")),
        registered_at=registered_at(status),
        backoff_step=_step(annotations),
        revision=_str(annotations.get(REVISION)),
        protected=LEASE_PROTECTION in (meta.get("finalizers") or ()),
        deleted_at=_time(meta.get("deletionTimestamp")),
        standby=_map(meta.get("labels")).get(STANDBY_LABEL) == "true",
        labels=tuple(sorted((str(k), str(v)) for k, v in _map(meta.get("labels")).items())),
    )


def pod_owner(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(name, uid) of the Pod's controller Exporter; without one, the Pod's own name and
    no uid (such a Pod belongs to no instance)."""
    meta = _map(obj.get("metadata"))
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") == "Exporter":
            return _str(ref.get("name")), _str(ref.get("uid")) or "-"
    return _str(meta.get("name")), "-"


def _exporter_state(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The terminated state of the `exporter` container, {} while it has not exited."""
    for container in status.get("containerStatuses") or []:
        if isinstance(container, Mapping) and container.get("name") == EXPORTER_CONTAINER:
            return _map(_map(container.get("state")).get("terminated"))
    return {}


def pod_exited(obj: Mapping[str, Any]) -> bool:
    """The Pod's exporter container has exited."""
    return bool(_exporter_state(_map(obj.get("status"))))


def _delete_requested(meta: Mapping[str, Any]) -> datetime | None:
    """The moment a graceful delete was asked for (deletionTimestamp minus its grace)."""
    at = _time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    if at is None:
        return None
    return at - timedelta(seconds=grace if isinstance(grace, int) else 0)


def pod_view_after(previous: PodView | None, current: PodView) -> PodView:
    """The view of a Pod's new event, keeping the earliest deletion request seen.

    A later delete with a shorter grace period moves deletionTimestamp - grace forward:
    kube-apiserver (k8s.io/apiserver registry/rest BeforeDelete) never lets the new
    deletionTimestamp fall before now, so the kubelet's final grace-0 delete, sent once
    the containers have stopped, makes every Pod deleted while it ran look as if it had
    finished first. The moment the deletion was first asked for is what tells the two
    apart, so it stays."""
    first = previous.delete_requested if previous and previous.uid == current.uid else None
    now = current.delete_requested
    if first is None or (now is not None and now <= first):
        return current
    return replace(current, delete_requested=first)


def pod_view(obj: Mapping[str, Any]) -> PodView:
    meta, status = _map(obj.get("metadata")), _map(obj.get("status"))
    exporter, owner_uid = pod_owner(obj)
    terminated = _exporter_state(status)
    code = terminated.get("exitCode")
    message = _str(terminated.get("message")).strip() or _str(status.get("message")).strip()
    return PodView(
        name=_str(meta.get("name")),
        exporter=exporter,
        phase=_str(status.get("phase")) or "Pending",
        owner_uid=owner_uid,
        uid=_str(meta.get("uid")),
        deleting=bool(meta.get("deletionTimestamp")),
        created=_time(meta.get("creationTimestamp")),
        delete_requested=_delete_requested(meta),
        exited=bool(terminated),
        exit_code=code if isinstance(code, int) else None,
        finished_at=_time(terminated.get("finishedAt")),
        message=message or _str(terminated.get("reason")) or _str(status.get("reason")),
        backoff_step=_step(_map(meta.get("annotations"))),
        node=_str(_map(obj.get("spec")).get("nodeName")),
    )


def lease_view(obj: Mapping[str, Any]) -> LeaseView:
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    return LeaseView(
        name=_str(meta.get("name")),
        selector=_map(spec.get("selector")),
        exporter=_str(_map(status.get("exporterRef")).get("name")),
        ended=status.get("ended") is True,
        created=_time(meta.get("creationTimestamp")),
        begin=_time(spec.get("beginTime")),
    )


def provisioned_view(resource: Resource, obj: Mapping[str, Any]) -> ProvisionedView:
    """An object of a provisioner's own resource, its instance read from INSTANCE_LABEL."""
    meta = _map(obj.get("metadata"))
    return ProvisionedView(
        resource=resource,
        name=_str(meta.get("name")),
        instance=_str(_map(meta.get("labels")).get(INSTANCE_LABEL)),
        uid=_str(meta.get("uid")),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def pool_claim(exporter_set: Mapping[str, Any]) -> PoolClaim:
    """A set as the claim rule of pending Leases sees it (`pool.rules.claims`)."""
    meta = _map(exporter_set.get("metadata"))
    spec = _map(exporter_set.get("spec"))
    labels = _map(_map(_map(spec.get("template")).get("metadata")).get("labels"))
    name = str(meta.get("name", ""))
    selector = spec.get("selector")
    try:
        created: datetime | None = parse_time(str(meta["creationTimestamp"]))
    except (KeyError, ValueError):
        created = None
    return PoolClaim(
        name,
        created,
        instance_labels(name, {str(k): str(v) for k, v in labels.items()}),
        selector if isinstance(selector, Mapping) else None,
    )
