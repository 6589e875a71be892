"""Planner stage, upkeep: the workload of the instances that stay (busy, available,
provisioning). A problem that stops scaling stops it too.

Rendering: an instance's config Secret and Pod exist only once Jumpstarter's controller
has issued its credentials (`Observation.awaiting` lists those still waiting; the status
says how many, an Event marks the start of the wait, and the pass requeues). A missing
Pod is created then, unless this process created one the cache has not shown yet; an
image the allow-list refuses (`Observation.images`) renders nothing new and tears
nothing down. Instances that run get their rendered objects kept current
(`Plan.keep_current`: the runtime compares and writes only what differs, so a steady
pool writes nothing).

Pods: one that belongs to no instance of the pool is deleted (once: a deleting one is
left to finish), and its name is held until it is gone. A finished Pod is deleted and a
new one follows. A Pod deleted while its exporter ran (by hand, an eviction) did not
finish: a deleting Pod counts as finished or failed only if its exporter ended before
the deletion was asked for (deletionTimestamp - deletionGracePeriodSeconds, the earliest
the Pod's events showed: the kubelet's final grace-0 delete moves it to that moment; a
restart reads the same from a Pod still terminating). The instance keeps its Exporter,
is not available meanwhile, and gets a new Pod once the old one is gone. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from pool.model.actions import Action, CreatePod, DeletePod
from pool.model.views import Observation
from pool.rules.buckets import Bucket, pods_finished, pods_going
from pool.rules.stages.census import Census
from pool.rules.steps import Steps, Wait

__all__ = ["AWAITING_REQUEUE", "Upkeep", "refused_images", "upkeep"]

_STAYING = (Bucket.BUSY, Bucket.AVAILABLE, Bucket.PROVISIONING)
# A safety net: the Exporter's status update and the Secret's creation wake the pass too.
AWAITING_REQUEUE = timedelta(seconds=10)


@dataclass(slots=True)
class Upkeep:
    steps: Steps = field(default_factory=Steps)
    awaiting: tuple[str, ...] = ()  # instances waiting for credentials, by name
    keep_current: tuple[str, ...] = ()  # running instances whose objects are kept current
    withheld: int = 0  # instances without a Pod because an image is refused


def refused_images(obs: Observation) -> str:
    """Why the allow-list refuses the pool's images, "" when it does not (or is off)."""
    return obs.images.message if obs.images is not None and not obs.images.status else ""


def upkeep(obs: Observation, counted: Census) -> Upkeep:
    if obs.problem is not None:
        return Upkeep()
    refused = refused_images(obs)
    actions: list[Action] = [
        DeletePod(pod.name, "its Exporter is not in the pool", pod.uid)
        for pod in counted.orphans
        if not pod.deleting  # one delete per Pod: a deleting one is left to finish
    ]
    held = {pod.name for pod in counted.orphans}  # names a new Pod cannot take yet
    waits: list[Wait] = []
    awaiting: list[str] = []
    keep_current: list[str] = []
    withheld = 0
    for bucket in _STAYING:
        for exporter in counted.members[bucket]:
            own = counted.pods(exporter)
            if exporter.name in obs.awaiting:
                awaiting.append(exporter.name)
            elif not own and refused:
                withheld += 1
            elif not own:
                if exporter.name in held:
                    why = f"the Pod {exporter.name} of an earlier Exporter is still there"
                    waits.append(Wait(why))
                elif exporter.identity not in obs.expected_pods:
                    actions.append(CreatePod(exporter.name, "credentials issued, no Pod yet"))
            elif pods_finished(own):
                why = "finished; a new Pod follows"
                actions.extend(DeletePod(p.name, why, p.uid) for p in own if not p.deleting)
            elif pods_going(own):
                waits.append(Wait(f"the Pod {own[0].name} is being deleted; a new one follows"))
            else:
                keep_current.append(exporter.name)
    # By name: the status message names the first, and the caches hand the instances
    # over in no particular order (a process would rewrite another's).
    awaiting.sort()
    requeue = AWAITING_REQUEUE if awaiting else None
    steps = Steps(tuple(actions), tuple(waits), requeue)
    return Upkeep(steps, tuple(awaiting), tuple(keep_current), withheld)
