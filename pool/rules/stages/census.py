"""Planner stage, census: every owned instance in its bucket (`pool.rules.buckets`),
with its Pods.

Identity: an instance's Pods are those whose controller owner's uid is its Exporter's
(`ExporterView.identity`); a Pod of an earlier Exporter of the same name is nobody's (an
orphan): it is deleted by uid (not again while it terminates) and a new Pod waits for the
name.

A create the cache has not shown yet is in `Observation.expected_exporters`: booting
capacity, and owned, so a pass planned from a lagging cache does not create it again
(`reconciler.runtime.expectations` says how the runtime keeps that true across crashes).

An instance whose every Pod is on a lost node (`Observation.lost_nodes`) is LOST unless
leased; a leased one stays BUSY, and `stranded` names it with its node and lease.

The revision is what the pool renders now: a digest of the set's spec without its
scaling fields, and of the class's spec (REVISION). No I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from pool.model.actions import Remove
from pool.model.views import (
    ExporterView,
    Observation,
    PodView,
    ProvisionedView,
    ReclaimPolicy,
    RecycleStrategy,
)
from pool.rules.buckets import Bucket, classify, is_leased, pods_lost
from pool.rules.rollout import current_revisions, is_outdated, revision_of

__all__ = ["Census", "census"]


@dataclass(slots=True)
class Census:
    members: Mapping[Bucket, list[ExporterView]]
    count: Mapping[Bucket, int]  # the expected creates counted as provisioning
    pods_of: Mapping[str, list[PodView]]  # by the identity of the Exporter owning them
    orphans: tuple[PodView, ...]  # Pods of no instance of the pool
    leased_by: dict[str, str]  # exporter name -> the Lease (not ended) naming it
    expected: tuple[str, ...]  # created by this process, not in the cache yet
    retain: bool  # reclaimPolicy Retain
    release_served: bool  # served instances leave the pool (Retain or ExitAndReplace)
    revision: str
    # busy instances on a lost node: (instance, node, lease), kept while the lease lasts
    stranded: tuple[tuple[str, str, str], ...] = ()
    # each instance's objects of the provisioner's own resources (`Observation.provisioned`)
    provisioned: Mapping[str, tuple[ProvisionedView, ...]] = field(default_factory=dict)

    def pods(self, exporter: ExporterView) -> tuple[PodView, ...]:
        return tuple(self.pods_of.get(exporter.identity, ()))

    @property
    def leaving(self) -> int:
        """Instances on their way out of the pool."""
        count = self.count
        return count[Bucket.TERMINATING] + count[Bucket.RELEASED] + count[Bucket.FAILED]

    def node_of(self, exporter: ExporterView) -> str:
        """The node of the instance's Pods ("" before one is scheduled)."""
        return next((p.node for p in self.pods_of.get(exporter.identity, ()) if p.node), "")

    def remove(self, exporter: ExporterView, fence: bool, why: str) -> Remove:
        """The step that takes the instance out, with its own Pods by uid and its
        provisioned objects."""
        own = self.pods_of.get(exporter.identity, ())
        pods = tuple((p.name, p.uid) for p in own if not p.deleting)
        provisioned = self.provisioned.get(exporter.name, ())
        return Remove(exporter.name, fence, why, exporter.uid, pods, provisioned=provisioned)


def census(obs: Observation) -> Census:
    pool, klass = obs.pool, obs.klass
    leased_by: dict[str, str] = {
        lease.exporter: lease.name for lease in obs.leases if lease.exporter and not lease.ended
    }
    identities = {e.identity for e in obs.exporters}
    pods_of: dict[str, list[PodView]] = defaultdict(list)
    orphans: list[PodView] = []
    for pod in obs.pods:
        if pod.owner in identities:
            pods_of[pod.owner].append(pod)
        else:
            orphans.append(pod)
    retain = klass is not None and klass.reclaim_policy == ReclaimPolicy.RETAIN
    release_served = retain or pool.recycle == RecycleStrategy.EXIT_AND_REPLACE
    members: dict[Bucket, list[ExporterView]] = {bucket: [] for bucket in Bucket}
    current = current_revisions(pool, klass)
    lost = obs.lost_nodes
    stranded: list[tuple[str, str, str]] = []
    for exporter in obs.exporters:
        pods = tuple(pods_of.get(exporter.identity, ()))
        old = is_outdated(exporter, current)
        bucket = classify(exporter, pods, leased_by, pool.recycle, release_served, old, lost)
        members[bucket].append(exporter)
        if lost and is_leased(exporter, leased_by) and pods_lost(pods, lost):
            lease = leased_by.get(exporter.name) or exporter.lease_ref
            stranded.append((exporter.name, pods[0].node, lease))
    expected = sorted(obs.expected_exporters - {e.name for e in obs.exporters})
    count = {bucket: len(group) for bucket, group in members.items()}
    count[Bucket.PROVISIONING] += len(expected)
    revision = revision_of(pool, klass)
    return Census(
        members, count, pods_of, tuple(orphans), leased_by, tuple(expected), retain,
        release_served, revision, tuple(stranded), obs.provisioned,
    )  # fmt: skip
