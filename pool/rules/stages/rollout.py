"""Planner stage, rollout: outdated instances replaced one at a time, never a busy one.

An instance rendered from an earlier revision (`pool.rules.rollout`) is outdated.
While the pool has outdated instances that are not busy, one pass takes at most one step:

- a surge of one: with nothing booting or leaving and the pool at its desired count, one
  instance of the current revision is created beside the outdated ones, if it fits under
  maxReplicas. Scale-down leaves that surplus alone while the rollout runs (`surge`);
- once the replacement is available (nothing of the current revision boots any more and
  the pool has an instance more than it needs), the oldest outdated idle instance goes
  (a booting one first). The available count never falls below the warm buffer on this
  path: it is one over it when the removal is planned. So does an outdated instance over
  the desired count for another reason (a surplus in its cooldown, WaitForFirstConsumer
  after a release): it needs no replacement;
- at the ceiling, where no surge fits, one outdated idle instance goes first (an
  unavailable budget of one), and scale-up brings its replacement in the next passes.

A busy instance is never touched: it is replaced once its lease has ended (ExitAndReplace
recycles it anyway; under InPlaceReuse it comes back outdated and idle, and goes then).
What holds the rollout: the set's annotation `virtualtarget.jumpstarter.dev/rollout:
paused` (new instances are still made at the current revision), a problem that stops
scaling, and a new revision that fails (`pool.rules.stages.failures`): while its
backoff is in force no healthy outdated instance goes; one surge probe is tried each time
the backoff's delay is over, and a fix of the template (a new revision) resumes at once.

Progressing says the rollout is under way (RollingOut, or RolloutPaused), how many
instances are on the current revision and what holds it; one Event marks its start and
one its end (read from the Progressing reason the status holds). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pool.model.actions import Action, CreateExporter, RecordEvent, Remove
from pool.model.keys import ROLLOUT, generate_name
from pool.model.reasons import (
    ROLLING_OUT,
    ROLLOUT_COMPLETE,
    ROLLOUT_PAUSED,
    ROLLOUT_STARTED,
)
from pool.model.status import condition_of
from pool.model.views import ExporterView, Observation
from pool.rules.buckets import Bucket
from pool.rules.protection import busy_lease
from pool.rules.rollout import ROLLOUT_REMOVAL, current_revisions, is_outdated
from pool.rules.stages.census import Census
from pool.rules.stages.failures import Failing
from pool.rules.stages.size import Size
from pool.rules.stages.upkeep import refused_images
from pool.rules.steps import Steps, Wait

__all__ = ["ROLLOUT_REASONS", "Rollout", "rollout"]

ROLLOUT_REASONS = (ROLLING_OUT, ROLLOUT_PAUSED)
_STAYING = (Bucket.BUSY, Bucket.AVAILABLE, Bucket.PROVISIONING)
_STOPPED = "stopped: instances of the new revision fail (see Degraded)"


@dataclass(slots=True)
class Rollout:
    creates: tuple[CreateExporter, ...] = ()
    steps: Steps = field(default_factory=Steps)
    surge: int = 0  # instances over the desired count that scale-down leaves to the rollout
    outdated: tuple[tuple[str, str], ...] = ()  # (instance, what it waits for), by name
    note: tuple[str, str] = ("", "")  # (reason, message) of Progressing while it runs
    failing: bool = False  # held because instances of the new revision fail

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.outdated)

    @property
    def removing(self) -> frozenset[str]:
        """The outdated instance this pass removes, if any."""
        return frozenset(a.name for a in self.steps.actions if isinstance(a, Remove))


@dataclass(slots=True)
class _Pool:
    """The instances that stay, told apart by revision."""

    busy: list[ExporterView]  # outdated, busy
    idle: list[ExporterView]  # outdated, not busy: booting ones first, then oldest first
    booting: list[str]  # of the current revision, not ready yet (creates not seen included)
    leaving: int  # instances on their way out, a lease-protected one excepted
    total: int


def rollout(
    obs: Observation, now: datetime, counted: Census, failing: Failing, sized: Size, growing: int
) -> Rollout:
    """`growing`: the instances scale-up creates in this pass."""
    pool = _split(obs, counted)
    if not pool.busy and not pool.idle:
        return Rollout(steps=_events(obs, False, ""))
    holds = _holds(obs, failing)
    creates: tuple[CreateExporter, ...] = ()
    steps, surge, doing = Steps(), 0, holds
    if not holds and pool.idle:
        steps, creates, surge, doing = _replace(obs, now, counted, failing, sized, growing, pool)
    waits = {e.name: f"its lease: {busy_lease(e, counted.leased_by)} must end" for e in pool.busy}
    for e in pool.idle:
        waits[e.name] = holds or doing or "its turn"
    outdated = tuple(sorted(waits.items()))
    current = pool.total - len(outdated)
    reason = ROLLOUT_PAUSED if obs.pool.rollout_paused else ROLLING_OUT
    what = doing or (f"{len(pool.busy)} leased instance(s) wait for their release")
    message = f"{current} of {pool.total} instance(s) on the current revision; {what}"
    told = _events(obs, True, message)
    held = Steps(steps.actions + told.actions, steps.waits, steps.requeue)
    if holds:
        held = Steps(held.actions, (*held.waits, Wait(f"rollout held: {holds}")))
    stopped = failing.backoff is not None or bool(failing.probing)
    return Rollout(creates, held, surge, outdated, (reason, message), stopped)


def _split(obs: Observation, counted: Census) -> _Pool:
    current = current_revisions(obs.pool, obs.klass)
    members = counted.members
    staying = [e for bucket in _STAYING for e in members[bucket]]
    outdated = {e.name for e in staying if is_outdated(e, current)}
    idle = [e for e in members[Bucket.PROVISIONING] if e.name in outdated]
    idle.sort(key=lambda e: (e.created, e.name))
    idle += sorted(
        (e for e in members[Bucket.AVAILABLE] if e.name in outdated),
        key=lambda e: (e.created, e.name),
    )
    busy = [e for e in members[Bucket.BUSY] if e.name in outdated]
    booting = [e.name for e in members[Bucket.PROVISIONING] if e.name not in outdated]
    booting += counted.expected
    leaving = sum(1 for e in members[Bucket.TERMINATING] if not e.protected)
    leaving += sum(1 for e in members[Bucket.DRAINING] if e.fenced)
    leaving += len(members[Bucket.RELEASED]) + len(members[Bucket.FAILED])
    total = len(staying) + len(counted.expected)
    return _Pool(busy, idle, booting, leaving, total)


def _holds(obs: Observation, failing: Failing) -> str:
    """What stops every replacement now, "" when nothing does."""
    if obs.problem is not None:
        return f"scaling stopped ({obs.problem[0]})"
    if obs.pool.rollout_paused:
        return f"paused by the annotation {ROLLOUT}"
    if refused_images(obs):
        return "the new images are refused"
    if failing.probing:
        return _STOPPED
    return ""  # under a backoff with no probe booting, `_replace` may try one


def _replace(
    obs: Observation,
    now: datetime,
    counted: Census,
    failing: Failing,
    sized: Size,
    growing: int,
    pool: _Pool,
) -> tuple[Steps, tuple[CreateExporter, ...], int, str]:
    """The one step of this pass: (steps, creates, surge held, what it does or waits for)."""
    victim = pool.idle[0]
    capacity, desired = sized.capacity, sized.desired
    surge = 1 if pool.booting and capacity > desired else 0
    if pool.booting:
        return Steps(), (), surge, f"replacement {pool.booting[0]} boots"
    backoff = failing.backoff
    if backoff is not None and not growing:
        return _probe(obs, now, counted, sized, backoff.retry_at, backoff.failures, victim)
    if growing or pool.leaving or capacity < desired:
        return Steps(), (), 0, "waits for the pool to reach its desired count"
    if capacity > desired:
        why = f"{ROLLOUT_REMOVAL}{capacity} instance(s) for {desired} wanted, none booting"
        step = counted.remove(victim, True, why)
        return Steps((step,)), (), 1, f"removing outdated {victim.name}"
    if not sized.ceiling or sized.owned < sized.ceiling:
        why = f"surge of one to replace outdated {victim.name}"
        create = CreateExporter(generate_name(obs.pool.name), why, 0, counted.revision)
        return Steps(), (create,), 1, f"a replacement for {victim.name} is created"
    why = f"{ROLLOUT_REMOVAL}no surge fits under maxReplicas {sized.ceiling}: goes first"
    step = counted.remove(victim, True, why)
    return Steps((step,)), (), 0, f"at maxReplicas {sized.ceiling}: replacing without a surge"


def _probe(
    obs: Observation,
    now: datetime,
    counted: Census,
    sized: Size,
    retry_at: datetime,
    failures: int,
    victim: ExporterView,
) -> tuple[Steps, tuple[CreateExporter, ...], int, str]:
    """A failing new revision: no outdated instance goes; one surge probe per backoff step."""
    if sized.ceiling and sized.owned >= sized.ceiling:
        return Steps(), (), 0, _STOPPED
    if now < retry_at:
        return Steps(requeue=retry_at - now), (), 0, _STOPPED
    why = f"surge probe for outdated {victim.name}; probe after {failures} failure(s) in a row"
    create = CreateExporter(generate_name(obs.pool.name), why, failures, counted.revision)
    return Steps(), (create,), 1, _STOPPED


def _events(obs: Observation, running: bool, message: str) -> Steps:
    """One Event when the rollout starts, one when it ends."""
    if obs.problem is not None:
        return Steps()
    before = condition_of(obs.pool.status, "Progressing").get("reason") in ROLLOUT_REASONS
    actions: list[Action] = []
    if running and not before:
        actions.append(RecordEvent(ROLLOUT_STARTED, f"rollout started: {message}"))
    elif before and not running:
        actions.append(RecordEvent(ROLLOUT_COMPLETE, "every instance is on the current revision"))
    return Steps(tuple(actions))
