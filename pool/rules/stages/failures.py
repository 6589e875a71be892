"""Planner stage, failures and backoff: the backoff in force, and the probes it lets boot.

An instance that failed (`pool.rules.backoff`: its Pod ended before the exporter
registered, or the exporter exited non-zero) is replaced under the pool's backoff,
whatever the recycle strategy. The backoff in force is the pool's memory of its failures
(`PoolView.backoff`) merged with what its failed instances say. Only failures of
instances rendered from the current revision count: after a change of template, images,
parameters or class they are a new attempt, not the next failure, so a fix is tried at
once and in full (a probe of an earlier revision holds nothing back). The memory ends
with such a change, or when an instance of the current revision registers after the last
failure (one that failed since proves nothing).

A probe is an instance created while the pool failed (it carries BACKOFF_STEP > 0) that
is still booting; so is a create the cache has not shown yet while a backoff is in force.
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pool.model.backoff import Backoff
from pool.model.views import ExporterView, Observation, PodView
from pool.rules.backoff import merge, newest_failure, registered_after, step_of
from pool.rules.buckets import Bucket, pods_finished
from pool.rules.stages.census import Census

__all__ = ["Failing", "failures"]


@dataclass(slots=True)
class Failing:
    backoff: Backoff | None  # in force: the memory merged with what failed instances say
    remembered: Backoff | None  # the pool's memory, unless a change or a registration ended it
    current: tuple[ExporterView, ...]  # failed instances of the current revision
    probing: tuple[str, ...]  # probes booting, by name


def failures(obs: Observation, counted: Census) -> Failing:
    pool, revision = obs.pool, counted.revision
    failed = counted.members[Bucket.FAILED]
    current = [e for e in failed if e.revision in ("", revision)]
    ended = [(e, max(counted.pods_of[e.identity], key=_ended)) for e in current]
    healed = registered_after((e for e in obs.exporters if e not in failed), revision)
    remembered = pool.backoff
    if remembered is not None and (
        remembered.revision not in ("", revision) or (healed is not None and healed > remembered.at)
    ):
        remembered = None
    backoff = merge(remembered, newest_failure(ended, revision, healed))
    probing = [
        e.name
        for e in counted.members[Bucket.PROVISIONING]
        if step_of(e) > 0 and e.revision in ("", revision) and not pods_finished(counted.pods(e))
    ]
    if backoff is not None:
        probing += counted.expected  # created while failing, not in the cache yet: a probe
    return Failing(backoff, remembered, tuple(current), tuple(probing))


def _ended(pod: PodView) -> tuple[bool, datetime]:
    """Sort key: the Pod that ended last (by the exporter's end, else creation)."""
    return pod.done, pod.finished_at or pod.created or datetime.min.replace(tzinfo=UTC)
