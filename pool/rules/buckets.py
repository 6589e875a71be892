"""Classify each owned Exporter into exactly one bucket of the docs/design.md §4 table.

Rules, first match wins:

- terminating: `metadata.deletionTimestamp` set;
- standby: labelled STANDBY_LABEL and not leased: an Exporter the pool keeps without a Pod
  so that a Lease it could serve always matches an enabled Exporter
  (`pool.rules.stages.standby`); not an instance: no capacity, not under the ceiling;
- failed: not busy, every Pod of the instance ended (or its exporter exited) and one of
  them failed (`pool.rules.backoff.failed`: ended before the exporter registered, or
  a non-zero exit), whatever the recycle strategy: replaced under the pool's backoff;
- terminating: under ExitAndReplace, not busy and every Pod of the instance finished
  (Succeeded or Failed, or its exporter exited);
- lost: not leased and every Pod of the instance is on a lost node (`pool.model.nodes`):
  it serves nothing and will not again, so it is neither capacity nor under the
  ceiling, and it leaves (`pool.rules.stages.departures`). A lease hook its exporter
  reported is not waited for: nothing on a lost node runs it, and its `exporterStatus`
  stays as the exporter last reported it (LeaseReady) for good. A leased one stays busy:
  the pool never removes an instance a lease holds, and says so
  (`pool.rules.stages.notes`);
- draining: `spec.enabled == false`;
- busy: leased, in a lease hook, or owes an afterLease hook (below);
- released: not busy, has served a lease (`served-lease` annotation, or a hook record
  naming a lease), and the pool lets served instances go (ExitAndReplace, or
  reclaimPolicy Retain);
- available: Registered and Online conditions True and `exporterStatus` in
  {"", Unspecified, Available}: the lease controller's own eligibility test, and its Pods
  have not all ended (an exporter that exited serves nothing, whatever its conditions
  still say) nor are all going;
- provisioning: anything else that is enabled (Pod pending, not registered, offline).

Busy, decided from `schemas/exporter.txt`:
- leased: a Lease that has not ended names the exporter in `status.exporterRef`, or the
  exporter's own `status.leaseRef.name` is set (it is derived from Leases and can lag,
  so either is enough);
- in a lease hook: `exporterStatus` is BeforeLeaseHook, LeaseReady, AfterLeaseHook,
  BeforeLeaseHookFailed or AfterLeaseHookFailed. The failed states belong to a lease the
  lease controller still has to settle; treating them as busy means the pool never
  fences them and never counts them as warm;
- owes an afterLease hook: `recordsLeaseHooks` is true, `status.leaseHooks` has a
  `beforeLease` entry (any phase: the hooks of that lease began), and its `afterLease`
  entry is unset or in phase Running or Failed. Only Succeeded and Skipped settle the
  debt. Running also covers a hook cut off by an exporter restart, and the document says
  such an exporter "is not assigned a new lease while its record owes an afterLease
  hook, whatever status it reports", so `exporterStatus` Available does not make it
  available. Failed counts as owed on purpose: nothing in the document says the lease
  controller assigns again after a failed afterLease hook, and erring towards busy only
  costs an extra instance, whereas erring towards available would fence or hand out an
  instance whose cleanup did not run.

A Pod being deleted counts as finished (or failed) only if its exporter ended before the
deletion was asked for (`PodView.done`); one deleted while it ran is `going`: it makes
its instance neither finished nor failed, only not available, until a new Pod runs.

Busy is tested before the finished-Pod rule: an instance whose Pod died while leased or
owing a hook is never removed by the pool; the lease controller settles it first.
Draining is tested before busy on purpose, as in the table: a fenced instance is out of
the pool's capacity whatever it is doing, and `removable` says whether it may go. No I/O.
"""

from __future__ import annotations

from collections.abc import Container
from enum import Enum

from pool.model.views import ExporterView, PodView, RecycleStrategy
from pool.rules.backoff import failed

__all__ = [
    "AVAILABLE_STATUSES",
    "HOOK_STATUSES",
    "Bucket",
    "classify",
    "is_busy",
    "is_leased",
    "is_ready",
    "owes_after_lease",
    "pods_failed",
    "pods_finished",
    "pods_going",
    "pods_lost",
    "served_lease",
]

# The lease controller's own eligibility test for exporterStatus.
AVAILABLE_STATUSES = frozenset({"", "Unspecified", "Available"})
HOOK_STATUSES = frozenset(
    {
        "BeforeLeaseHook",
        "LeaseReady",
        "AfterLeaseHook",
        "BeforeLeaseHookFailed",
        "AfterLeaseHookFailed",
    }
)
_SETTLED_HOOK_PHASES = frozenset({"Succeeded", "Skipped"})


class Bucket(Enum):
    TERMINATING = "terminating"
    FAILED = "failed"
    DRAINING = "draining"
    BUSY = "busy"
    RELEASED = "released"
    AVAILABLE = "available"
    PROVISIONING = "provisioning"
    STANDBY = "standby"
    LOST = "lost"


def is_leased(exporter: ExporterView, leased_names: Container[str]) -> bool:
    return bool(exporter.lease_ref) or exporter.name in leased_names


def owes_after_lease(exporter: ExporterView) -> bool:
    hooks = exporter.hooks
    if not exporter.records_lease_hooks or hooks is None or hooks.before_phase is None:
        return False
    return hooks.after_phase not in _SETTLED_HOOK_PHASES


def is_busy(exporter: ExporterView, leased_names: Container[str]) -> bool:
    return (
        is_leased(exporter, leased_names)
        or exporter.exporter_status in HOOK_STATUSES
        or owes_after_lease(exporter)
    )


def is_ready(exporter: ExporterView) -> bool:
    """Registered and Online: `status.readyReplicas` counts these."""
    return exporter.registered and exporter.online


def pods_finished(pods: tuple[PodView, ...]) -> bool:
    return bool(pods) and all(pod.done for pod in pods)


def pods_going(pods: tuple[PodView, ...]) -> bool:
    """Every Pod of the instance is being deleted without having finished first."""
    return bool(pods) and all(pod.going for pod in pods)


def pods_lost(pods: tuple[PodView, ...], lost_nodes: Container[str]) -> bool:
    """Every Pod of the instance is on a lost node."""
    return bool(pods) and all(pod.node and pod.node in lost_nodes for pod in pods)


def pods_failed(exporter: ExporterView, pods: tuple[PodView, ...]) -> bool:
    return pods_finished(pods) and any(failed(exporter, pod) for pod in pods)


def served_lease(exporter: ExporterView) -> str:
    """The lease the instance has served, "" when none (annotation, else hook record)."""
    return exporter.served_lease or (exporter.hooks.lease_name if exporter.hooks else "")


def classify(
    exporter: ExporterView,
    pods: tuple[PodView, ...],
    leased_names: Container[str],
    recycle: str,
    release_served: bool,
    outdated: bool = False,
    lost_nodes: Container[str] = (),
) -> Bucket:
    """The bucket of one instance; `release_served` is true when served instances leave.
    An idle instance whose Pods finished leaves under ExitAndReplace, and under
    InPlaceReuse too when it is `outdated` (of an earlier revision): a new Pod would boot
    it from the new spec only for the rollout to replace it."""
    if exporter.deleting:
        return Bucket.TERMINATING
    if exporter.standby and not is_leased(exporter, leased_names):
        return Bucket.STANDBY  # never online, so never in a lease or its hooks
    busy = is_busy(exporter, leased_names)
    if not busy and pods_failed(exporter, pods):
        return Bucket.FAILED
    leaves = recycle == RecycleStrategy.EXIT_AND_REPLACE or outdated
    if not busy and leaves and pods_finished(pods):
        return Bucket.TERMINATING
    if pods_lost(pods, lost_nodes) and not is_leased(exporter, leased_names):
        return Bucket.LOST
    if not exporter.enabled:
        return Bucket.DRAINING
    if busy:
        return Bucket.BUSY
    if release_served and served_lease(exporter):
        return Bucket.RELEASED
    serving = is_ready(exporter) and not pods_finished(pods) and not pods_going(pods)
    if serving and exporter.exporter_status in AVAILABLE_STATUSES:
        return Bucket.AVAILABLE
    return Bucket.PROVISIONING
