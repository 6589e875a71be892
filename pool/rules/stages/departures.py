"""Planner stage, departures: instances leaving on their own account. A problem that stops
scaling (`Observation.problem`) stops them too: no fence, no delete.

- Recycling: ExitAndReplace removes an instance once it has served a lease and is no
  longer busy (released), or once its Pod finished; InPlaceReuse leaves it in the pool,
  unless its Pod finished while it is of an earlier revision: a new Pod would boot it
  from the new spec only for the rollout to replace it, so it goes (a wasted boot saved).
  reclaimPolicy Retain overrides both: a released instance is fenced and detached from
  the set, so it stays for debugging outside the pool's count.
- Failed instances (`pool.rules.stages.failures`): the pool's memory is written
  first (`RememberBackoff`), and a failed instance of the current revision leaves only
  once the memory holds its failure (a pass that writes it removes none). The newest
  stays as the record of the backoff until its delay is over; the others go now, and
  those of an earlier revision go at once.
- Lost instances (`pool.rules.buckets`, LOST): idle, every Pod on a lost node. Each goes
  at once, unfenced (a fence waits for a Pod that can no longer answer): the delete's
  live check still keeps one a Lease took meanwhile. Its Exporter goes, and with it the
  credential its exporter registered with, so a Pod that comes back with its node cannot
  register again as a ghost; its Pods are deleted too, and finish when the node returns.
- An instance the pool fenced earlier goes for the reason it was fenced for (FENCED_FOR:
  its Event's reason and why); if it is busy, a Lease took it before the fence settled
  (a pick from a read before the fence), and its fence is lifted (`LiftFence`); so is a
  rollout's fence once the rollout is paused (a pause holds what has not gone yet).

Removal is `Remove`: fence in one pass; in a later one, once the fence has settled
(`pool.rules.stages.settle`), a live check that no Lease took it, and the delete.
No I/O.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from pool.model.actions import Action, LiftFence, RememberBackoff, Remove, Retain
from pool.model.backoff import Backoff
from pool.model.keys import ROLLOUT
from pool.model.reasons import NODE_LOST, RECYCLE, SCALE_DOWN
from pool.model.timefmt import format_time
from pool.model.views import ExporterView, Observation, RecycleStrategy
from pool.rules.buckets import Bucket, is_busy, served_lease
from pool.rules.rollout import fenced_by_rollout
from pool.rules.stages.census import Census
from pool.rules.stages.failures import Failing
from pool.rules.steps import Steps, Wait, sooner

__all__ = ["REMEMBERED_REQUEUE", "departures"]

# After a write of the pool's memory, the pass that removes the failed instances it holds
# (a write of the set's annotation wakes one too; one of its memory Lease does not).
REMEMBERED_REQUEUE = timedelta(seconds=1)


def departures(obs: Observation, now: datetime, counted: Census, failing: Failing) -> Steps:
    if obs.problem is not None:
        return Steps()
    members, remove = counted.members, counted.remove
    actions: list[Action] = []
    exit_and_replace = obs.pool.recycle == RecycleStrategy.EXIT_AND_REPLACE
    why = "its Pod finished (" + ("ExitAndReplace)" if exit_and_replace else "outdated)")
    for exporter in members[Bucket.TERMINATING]:
        if not exporter.deleting:  # not being deleted: its Pods finished (classify)
            actions.append(remove(exporter, exporter.enabled, why))
    failed = _failed(obs, now, counted, failing)
    actions += failed.actions
    for exporter in members[Bucket.LOST]:
        node = counted.node_of(exporter)
        why = f"its node {node} is lost ({obs.lost_nodes.get(node, '')})"
        actions.append(replace(remove(exporter, False, why), event=NODE_LOST))
    leaving = "reclaimPolicy Retain keeps it" if counted.retain else "ExitAndReplace replaces it"
    for exporter in members[Bucket.RELEASED]:
        why = f"served lease {served_lease(exporter)}; {leaving}"
        actions.append(
            Retain(exporter.name, why) if counted.retain else remove(exporter, True, why)
        )
    for exporter in members[Bucket.DRAINING]:
        if not exporter.fenced:
            continue  # disabled by a person: left alone
        if is_busy(exporter, counted.leased_by):
            lease = counted.leased_by.get(exporter.name) or exporter.lease_ref
            why = f"a Lease ({lease}) took it before the fence settled" if lease else "busy"
            actions.append(LiftFence(exporter.name, why))
        elif obs.pool.rollout_paused and fenced_by_rollout(exporter):
            actions.append(LiftFence(exporter.name, f"the rollout is paused ({ROLLOUT})"))
        else:
            actions.append(_fenced_earlier(exporter, counted))
    return Steps(tuple(actions), failed.waits, failed.requeue)


def _fenced_earlier(exporter: ExporterView, counted: Census) -> Remove:
    """The delete of an instance the pool fenced, with the reason it was fenced for; a
    fence without one (written before FENCED_FOR was) reads as a scale-down."""
    reason, why = exporter.fence_reason
    if reason not in (RECYCLE, SCALE_DOWN):
        reason, why = SCALE_DOWN, "fenced by the pool, not busy"
    return replace(counted.remove(exporter, False, why), event=reason)


def _failed(obs: Observation, now: datetime, counted: Census, failing: Failing) -> Steps:
    """The pool's memory first, then the failed instances it holds."""
    backoff, remove = failing.backoff, counted.remove
    actions: list[Action] = []
    waits: list[Wait] = []
    requeue = None
    remembering = backoff != obs.pool.backoff
    if remembering:
        why = _remember_why(backoff, obs.pool.backoff, counted.revision)
        actions.append(RememberBackoff(backoff, why))
        requeue = REMEMBERED_REQUEUE
    for exporter in counted.members[Bucket.FAILED]:
        why = f"failed before serving ({backoff.quote if backoff else ''})"
        if exporter not in failing.current:
            why = "failed before the spec or class changed: no reason to wait"
            actions.append(remove(exporter, exporter.enabled, why))
        elif remembering:
            continue
        elif backoff is not None and exporter.name == backoff.instance:
            leave = remove(exporter, exporter.enabled, f"backoff over; {why}")
            if now >= backoff.retry_at:
                actions.append(leave)
            else:
                waits.append(Wait(backoff.message(), leave, backoff.retry_at))
                requeue = sooner(requeue, backoff.retry_at - now)
        else:
            actions.append(remove(exporter, exporter.enabled, "an earlier failure"))
    return Steps(tuple(actions), tuple(waits), requeue)


def _remember_why(backoff: Backoff | None, before: Backoff | None, revision: str) -> str:
    if backoff is not None:
        return f"{backoff.step_note}, the last {backoff.instance} at {format_time(backoff.at)}"
    if before is not None and before.revision not in ("", revision):
        return "the spec or class changed"
    return "an instance registered since the last failure"
