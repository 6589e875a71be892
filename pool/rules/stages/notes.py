"""Planner stage, notes: what the status and the Events say about the pass, beyond its steps.

- The ceiling: when more instances are wanted than maxReplicas allows, the pass waits
  saying so (ScalingLimited).
- Credentials: while instances wait for them and the pool neither grows nor shrinks,
  Progressing names how many and the first (by name); an Event marks the start of the
  wait (not again while the status still says so).
- A step of this pass that failed for good (`Observation.failure`: rendering raised, the
  apiserver refused a write) makes the pool Degraded, naming the step, its instance and
  the error; a Warning Event tells each distinct failure after the first (whose Event
  is the condition's transition). While the status still says the last pass failed, the
  pass says so too (a `failed` wait).
- Otherwise a failing pool is Degraded, its message quoting the pool's memory of the last failure,
  so it stays while a probe boots; a probe without that memory (made by an earlier
  version) keeps what was said. One BackOff Event per step: a step the memory (or,
  while its cache lags, the status) holds was told already.
- Otherwise instances on lost nodes (`pool.model.nodes`) make the pool Degraded
  (InstancesLost), the message counting them and naming each leased one with its node and
  lease. A leased one is never removed by the pool: a Warning Event (NodeLost) tells
  its lease's holder, once (not again while the condition names it). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pool.model.actions import Action, RecordEvent
from pool.model.backoff import Backoff
from pool.model.reasons import (
    BACK_OFF,
    INSTANCES_LOST,
    NODE_LOST,
    PODS_FAILING,
    ROLLING_OUT,
    ROLLOUT_PAUSED,
    SCALING_DOWN,
    SCALING_UP,
    STEP_FAILURES,
    WAITING_FOR_CREDENTIALS,
)
from pool.model.status import condition_of
from pool.model.views import Observation
from pool.rules.buckets import Bucket
from pool.rules.stages.census import Census
from pool.rules.stages.failures import Failing
from pool.rules.stages.size import Size
from pool.rules.stages.upkeep import Upkeep
from pool.rules.steps import Steps, Wait

__all__ = ["Notes", "notes"]


@dataclass(slots=True)
class Notes:
    steps: Steps
    scale: tuple[str, str]  # (reason, message) of Progressing, ("", "") when settled
    ceiling: str  # why ScalingLimited, "" within the limits
    degraded: tuple[str, str]  # (reason, message) of Degraded=True, ("", "") when healthy


def notes(
    obs: Observation,
    counted: Census,
    failing: Failing,
    sized: Size,
    kept: Upkeep,
    scale: tuple[str, str],
    at_ceiling: bool,
) -> Notes:
    status, backoff = obs.pool.status, failing.backoff
    actions: list[Action] = []
    ceiling = f"{sized.wanted} instance(s) wanted, maxReplicas is {sized.ceiling}"
    ceiling = ceiling if at_ceiling else ""
    waits = [Wait(ceiling)] if ceiling and obs.problem is None else []
    if kept.awaiting and scale[0] not in (SCALING_UP, SCALING_DOWN, ROLLING_OUT, ROLLOUT_PAUSED):
        first = kept.awaiting[0]
        scale = (
            WAITING_FOR_CREDENTIALS,
            f"{len(kept.awaiting)} instance(s) wait for credentials from Jumpstarter's "
            f"controller; {first}: {obs.awaiting[first]}",
        )
        if condition_of(status, "Progressing").get("reason") != WAITING_FOR_CREDENTIALS:
            actions.append(RecordEvent(WAITING_FOR_CREDENTIALS, scale[1]))
    degraded = _step_failure(obs) or _degraded(status, backoff, failing.probing)
    before = condition_of(status, "Degraded")
    if not degraded[0] and (lost := _lost(obs, counted)):
        degraded = (INSTANCES_LOST, lost)
        for name, node, lease in counted.stranded:
            if before.get("reason") != INSTANCES_LOST or name not in str(before.get("message")):
                said = f"instance {name} is on lost node {node} ({obs.lost_nodes.get(node)})"
                said += f"; it serves lease {lease}: kept until the lease ends"
                actions.append(RecordEvent(NODE_LOST, said, warning=True))
    if obs.failure is not None:
        # One Warning per distinct failure: the transition Event carries the first one.
        if before.get("status") == "True" and before.get("message") != degraded[1]:
            actions.append(RecordEvent(obs.failure.reason, degraded[1], warning=True))
    elif before.get("status") == "True" and before.get("reason") in STEP_FAILURES:
        waits.append(Wait(f"{before.get('reason')}: {before.get('message', '')}", failed=True))
    remembered = failing.remembered
    if (
        backoff is not None
        and obs.problem is None
        and (remembered is None or backoff.failures > remembered.failures)
        and backoff.step_note not in str(condition_of(status, "Degraded").get("message"))
    ):
        actions.append(RecordEvent(BACK_OFF, degraded[1], warning=True))
    return Notes(Steps(tuple(actions), tuple(waits)), scale, ceiling, degraded)


def _lost(obs: Observation, counted: Census) -> str:
    """The Degraded message of instances on lost nodes, "" when there are none."""
    idle, stranded = counted.members[Bucket.LOST], counted.stranded
    if not idle and not stranded:
        return ""
    nodes = sorted({counted.node_of(e) for e in idle} | {node for _, node, _ in stranded})
    said = f"{len(idle) + len(stranded)} instance(s) on lost node(s) {', '.join(nodes)}"
    if idle:
        said += f"; {len(idle)} idle, replaced"
    for name, node, lease in stranded:
        said += f"; {name} on {node} serves lease {lease}, kept until the lease ends"
    return said


def _step_failure(obs: Observation) -> tuple[str, str] | None:
    """(reason, message) of Degraded=True when a step of this pass failed."""
    if obs.failure is None:
        return None
    return obs.failure.reason, str(obs.failure)


def _degraded(
    status: Mapping[str, object], backoff: Backoff | None, probing: tuple[str, ...]
) -> tuple[str, str]:
    if backoff is not None:
        return PODS_FAILING, backoff.message()
    if probing:
        before = condition_of(status, "Degraded")
        if before.get("reason") == PODS_FAILING:
            return PODS_FAILING, str(before.get("message", ""))
        return PODS_FAILING, f"probing: {probing[0]} starts after earlier failures"
    return "", ""
