"""Planner stage, scale down: remove a surplus once it has lasted `scaleDownCooldown`.

The surplus is capacity - desired, limited to instances that are not busy. The first pass
that sees a surplus records the moment in the pool's memory (SURPLUS_SINCE, an
annotation of the set or its memory Lease), so a restart does not reset the cooldown; a
pass without surplus clears it. Until the cooldown is over the removals wait, due at its
end. Victims are never busy. Instances of an earlier revision go first, as a Deployment
scales its old ReplicaSet down first (the rollout would replace them anyway: removing a
current one instead costs a replacement boot later); within each revision group,
provisioning before available, then newest first (name breaks ties). An instance the
rollout removes in this pass is not chosen again.

A problem (`Observation.problem`: a missing class, a class of another provisioner,
invalid merged parameters) stops scaling: no create, no fence, no delete; the pass waits
saying why, and the surplus memory is cleared, so after the repair the cooldown starts
afresh and fixing a class never triggers an immediate scale-down. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from pool.model.actions import Action, SetSurplusSince
from pool.model.reasons import SCALE_DOWN, SCALE_DOWN_COOLDOWN, SCALING_DOWN
from pool.model.timefmt import format_duration, format_time
from pool.model.views import ExporterView, Observation
from pool.rules.buckets import Bucket
from pool.rules.rollout import current_revisions, is_outdated
from pool.rules.stages.census import Census
from pool.rules.stages.size import Size
from pool.rules.steps import Steps, Wait

__all__ = ["Shrink", "scale_down"]


@dataclass(slots=True)
class Shrink:
    steps: Steps = field(default_factory=Steps)
    note: tuple[str, str] = ("", "")  # (reason, message) for Progressing


def scale_down(
    obs: Observation,
    now: datetime,
    counted: Census,
    sized: Size,
    surge: int = 0,
    removing: frozenset[str] = frozenset(),
) -> Shrink:
    """`surge`: instances over the desired count a rollout holds (its replacement, or the
    outdated instance it removes in this pass, named in `removing`)."""
    pool = obs.pool
    if obs.problem is not None:
        reason, message = obs.problem
        return Shrink(Steps(_forget(obs, f"scaling stopped ({reason})"), (Wait(message),)))
    candidates = [e for e in _victims_first(obs, counted) if e.name not in removing]
    surplus = min(sized.capacity - sized.desired - surge, len(candidates))
    if surplus <= 0:
        return Shrink(Steps(_forget(obs, "no surplus now")))
    actions: list[Action] = []
    since = pool.surplus_since or now
    if pool.surplus_since is None:
        actions.append(SetSurplusSince(now, f"capacity {sized.capacity}, desired {sized.desired}"))
    deadline = since + pool.cooldown
    why = f"surplus since {format_time(since)}, cooldown {format_duration(pool.cooldown)}"
    victims = [
        replace(counted.remove(e, True, why), event=SCALE_DOWN) for e in candidates[:surplus]
    ]
    if now >= deadline:
        note = (SCALING_DOWN, f"removing {surplus} instance(s) towards {sized.desired}")
        return Shrink(Steps((*actions, *victims)), note)
    note = (
        SCALE_DOWN_COOLDOWN,
        f"{surplus} surplus instance(s) since {format_time(since)}; "
        f"scale down at {format_time(deadline)}",
    )
    waits = tuple(Wait(why, victim, deadline) for victim in victims)
    return Shrink(Steps(tuple(actions), waits, deadline - now), note)


def _forget(obs: Observation, why: str) -> tuple[Action, ...]:
    """Clear the surplus memory, if it holds a moment."""
    return () if obs.pool.surplus_since is None else (SetSurplusSince(None, why),)


def _victims_first(obs: Observation, counted: Census) -> list[ExporterView]:
    """The idle instances in the order they go: outdated before current, provisioning
    before available, newest first."""
    current = current_revisions(obs.pool, obs.klass)
    idle = [*_newest_first(counted.members[Bucket.PROVISIONING]),
            *_newest_first(counted.members[Bucket.AVAILABLE])]  # fmt: skip
    return sorted(idle, key=lambda e: not is_outdated(e, current))  # stable: keeps the rest


def _newest_first(exporters: list[ExporterView]) -> list[ExporterView]:
    return sorted(exporters, key=lambda e: (e.created, e.name), reverse=True)
