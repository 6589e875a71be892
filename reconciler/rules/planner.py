"""The pool planner: one set's observed world and `now` in, the steps and status out.

Pure and deterministic (no I/O, no clock, no randomness): the runtime, the simulation,
the property tests and the benchmarks all call `plan` with the same inputs.

Semantics (DESIGN §4). Each owned Exporter falls in one bucket (`reconciler.rules.buckets`,
whose docstring states the busy and "owes an afterLease hook" rules precisely). With
W = minAvailableReplicas (0 under WaitForFirstConsumer), Q = Leases that have not ended,
have no exporter yet and whose selector matches the labels an instance would carry,
and M = maxReplicas (0 = no ceiling):

    desired  = min(max(minReplicas, busy + W + Q), M)
    capacity = busy + available + provisioning        (booting instances count)
    creates  = min(desired - capacity, M - owned)     (the ceiling counts every owned
                                                       object, draining and terminating too)

Scale down happens only once the surplus (capacity - desired, limited to instances
that are not busy) has lasted `scaleDownCooldown`: the first pass that sees a surplus
records the moment in the set's SURPLUS_SINCE annotation (so a restart does not reset
the cooldown), a pass without surplus clears it. Victims are never busy: provisioning
before available, then newest first (name breaks ties). Removal is `Remove`: fence,
live check that no Lease took it, delete.

Identity: an instance's Pods are those whose controller owner's uid is its Exporter's
(`ExporterView.identity`); a Pod of an earlier Exporter of the same name is nobody's: it
is deleted by uid (not again while it terminates) and a new Pod waits for the name.

Recycling: ExitAndReplace removes an instance once it has served a lease and is no
longer busy (or its Pod finished); InPlaceReuse leaves it in the pool. A Pod deleted
while its exporter ran (by hand, an eviction) did not finish: a deleting Pod counts as
finished or failed only if its exporter ended before the deletion was asked for
(deletionTimestamp - deletionGracePeriodSeconds, the earliest the Pod's events showed: the
kubelet's final grace-0 delete moves it to that moment; a restart reads the same from a
Pod still terminating. The pool deletes only Pods that finished, or those of an instance it
removes). The
instance keeps its Exporter, is not available meanwhile, and gets a new Pod once the old
one is gone. An instance that
failed (`reconciler.rules.backoff`: its Pod ended before the exporter registered, or the
exporter exited non-zero) is replaced under the pool's backoff whatever the strategy:
the pool remembers its failures (`Backoff`, written with `RememberBackoff` before any
failed instance leaves), the newest failed instance stays until its delay is over, then
one probe replaces it, in that pass or, at the ceiling, the next. Only failures of
instances rendered from the current revision (`REVISION`: a digest of the set's spec
without its scaling fields, and of the class's spec) count: after a change of template,
images, parameters or class the failed instances go at once and the pool fills without
waiting out a delay (a probe of an earlier revision holds nothing back). reclaimPolicy
Retain overrides both: a released instance is fenced and detached from the set, so it
stays for debugging outside the pool's count. A missing class, a class of another
provisioner or invalid merged parameters (`Observation.problem`) stop scaling: no
create, no fence, no delete; only the status says why, and the surplus memory is
cleared so the cooldown starts afresh after the repair.

Rendering: an instance's config Secret and Pod exist only once Jumpstarter's controller
has issued its credentials (`Observation.awaiting` lists those still waiting; the status
says how many, an Event marks the start of the wait, and the pass requeues). Instances
that run get their rendered objects kept current (`Plan.keep_current`: the runtime
compares and writes only what differs, so a steady pool writes nothing).

Instance names are never reused: an Exporter is created with `generateName: <set>-`, as
Jumpstarter's controller names them, so nothing of an earlier instance (a Pod still
terminating on its node, a Secret not yet collected) shares a new one's name. A create
the cache has not shown yet is in `Observation.expected_exporters` (booting capacity,
owned), so a pass planned from a lagging cache does not create it again
(`reconciler.runtime.expectations` says how the runtime keeps that true across crashes).

Explanations: every step that changes the pool carries its reason (`why`, in the terms
of the rules above: "warm buffer 2, available 0", "surplus since ..., cooldown 5m"),
and `Plan.waits` says what the pass holds back: the scale-down steps a cooldown delays,
with the moment they become due, a problem that stops scaling, the ceiling. The
reconciler's log and Events and `virtualtarget plan` print these words
(`reconciler.rules.explain`), so they always agree with what a pass does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from api.labels import selector_matches, selector_string
from reconciler.model.actions import (
    Action,
    CreateExporter,
    CreatePod,
    DeletePod,
    MarkServed,
    PatchStatus,
    RecordEvent,
    RememberBackoff,
    Remove,
    Retain,
    SetSurplusSince,
)
from reconciler.model.backoff import Backoff
from reconciler.model.keys import SET_LABEL, generate_name, instance_labels
from reconciler.model.reasons import (
    ALL_HEALTHY,
    ALL_READY,
    AT_MAX,
    BACK_OFF,
    MINIMUM_AVAILABLE,
    MINIMUM_UNAVAILABLE,
    NO_REPLICAS_REQUIRED,
    PODS_FAILING,
    PODS_STARTING,
    RECYCLING,
    REPLICAS_NOT_READY,
    SCALE_DOWN,
    SCALE_DOWN_COOLDOWN,
    SCALING_DOWN,
    SCALING_UP,
    WAIT_FOR_FIRST_CONSUMER,
    WAITING_FOR_CREDENTIALS,
    WITHIN_LIMITS,
)
from reconciler.model.status import ConditionSpec, Counters, build_status, condition_of
from reconciler.model.timefmt import format_duration, format_time
from reconciler.model.views import (
    BindingMode,
    ExporterView,
    Observation,
    PodView,
    PoolView,
    ReclaimPolicy,
    RecycleStrategy,
)
from reconciler.rules.backoff import (
    failed,
    merge,
    newest_failure,
    registered_after,
    step_of,
)
from reconciler.rules.buckets import (
    Bucket,
    classify,
    is_busy,
    is_leased,
    is_ready,
    pods_finished,
    pods_going,
    served_lease,
)
from reconciler.rules.transitions import transition_events

__all__ = [
    "AWAITING_REQUEUE",
    "BACK_OFF",
    "PODS_FAILING",
    "WAITING_FOR_CREDENTIALS",
    "Plan",
    "Wait",
    "plan",
]

_STAYING = (Bucket.BUSY, Bucket.AVAILABLE, Bucket.PROVISIONING)

# A safety net: the Exporter's status update and the Secret's creation wake the pass too.
AWAITING_REQUEUE = timedelta(seconds=10)
# After a write of the pool's memory, the pass that removes the failed instances it holds
# (a write of the set's annotation wakes one too; one of its memory Lease does not).
REMEMBERED_REQUEUE = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Wait:
    """What a pass holds back, and why: a step due at `at` (a scale-down waiting for its
    cooldown), or, without a step, what stops or limits scaling (a problem, the ceiling)."""

    reason: str
    action: Action | None = None
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    status: Mapping[str, object]
    desired: int
    buckets: Mapping[Bucket, int]
    pending_leases: int
    requeue_after: timedelta | None = None
    # instances whose config Secret (and other rendered objects) the runtime keeps current
    keep_current: tuple[str, ...] = ()
    awaiting: tuple[str, ...] = ()  # instances waiting for credentials
    warm: int = 0  # the warm buffer in force (0 under WaitForFirstConsumer)
    at_ceiling: bool = False  # more instances wanted than maxReplicas allows

    @property
    def warm_shortfall(self) -> int:
        """How many warm instances the pool lacks now."""
        return max(0, self.warm - self.buckets.get(Bucket.AVAILABLE, 0))

    waits: tuple[Wait, ...] = ()


def _newest_first(exporters: list[ExporterView]) -> list[ExporterView]:
    return sorted(exporters, key=lambda e: (e.created, e.name), reverse=True)


def plan(obs: Observation, now: datetime) -> Plan:
    pool, klass = obs.pool, obs.klass
    leased_by: dict[str, str] = {
        lease.exporter: lease.name for lease in obs.leases if lease.exporter and not lease.ended
    }
    # Pods by the uid of their controller Exporter: a Pod of an earlier Exporter of the same
    # name (still terminating while the name came back) is nobody's here.
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
    for exporter in obs.exporters:
        pods = tuple(pods_of.get(exporter.identity, ()))
        members[classify(exporter, pods, leased_by, pool.recycle, release_served)].append(exporter)
    # Created by this process, not in the cache yet: booting capacity, owned.
    expected = sorted(obs.expected_exporters - {e.name for e in obs.exporters})
    count = {bucket: len(group) for bucket, group in members.items()}
    count[Bucket.PROVISIONING] += len(expected)
    # Only failures of what the pool renders now count: a changed spec or class is a new
    # attempt, not the next failure, so a fix is tried at once and in full.
    revision = f"{pool.revision}.{klass.revision}" if klass is not None else pool.revision
    current = [e for e in members[Bucket.FAILED] if e.revision in ("", revision)]
    failures = [(e, max(pods_of[e.identity], key=_ended)) for e in current]
    # The backoff in force: the pool's memory of its failures (a fix, or an instance that
    # registered since the last failure, ends it) with what its failed instances say.
    healed = registered_after(  # (one that failed since proves nothing)
        (e for e in obs.exporters if e not in members[Bucket.FAILED]), revision
    )
    remembered = pool.backoff
    if remembered is not None and (
        remembered.revision not in ("", revision) or (healed is not None and healed > remembered.at)
    ):
        remembered = None
    backoff = merge(remembered, newest_failure(failures, revision, healed))
    probing = [
        e.name
        for e in members[Bucket.PROVISIONING]
        if step_of(e) > 0
        and e.revision in ("", revision)
        and not pods_finished(tuple(pods_of.get(e.identity, ())))
    ]
    if backoff is not None:
        probing += expected  # created while failing, not in the cache yet: a probe

    labels = instance_labels(pool.name, pool.template_labels)
    # A Lease an owned Exporter already names in its leaseRef is served, not pending, even
    # while the Lease's own exporterRef has not reached this cache (two watches, either may
    # lead): counted as both busy and pending, it made the pool create one instance too many.
    serving = {e.lease_ref for e in obs.exporters if e.lease_ref}
    pending = sum(
        1
        for lease in obs.leases
        if not lease.ended
        and not lease.exporter
        and lease.name not in serving
        and selector_matches(lease.selector, labels)
    )
    wffc = klass is not None and klass.binding_mode == BindingMode.WAIT_FOR_FIRST_CONSUMER
    warm = 0 if wffc else pool.min_available
    ceiling = pool.max_replicas
    wanted = max(pool.min_replicas, count[Bucket.BUSY] + warm + pending)
    desired = min(wanted, ceiling) if ceiling else wanted
    capacity = count[Bucket.BUSY] + count[Bucket.AVAILABLE] + count[Bucket.PROVISIONING]
    owned = len(obs.exporters) + len(expected)

    actions: list[Action] = []
    waits: list[Wait] = []
    requeue: timedelta | None = None
    awaiting: list[str] = []
    keep_current: list[str] = []
    ceiling_blocks = ceiling > 0 and wanted > ceiling
    # An image the allow-list refuses: nothing new is rendered from it, nothing is torn down.
    refused = obs.images.message if obs.images is not None and not obs.images.status else ""
    withheld = 0
    scale_note = ("", "")  # (reason, message) of a pending or ongoing scale step

    # Remember served leases where a release will matter (cheap, and harmless while busy).
    if release_served:
        for exporter in members[Bucket.BUSY]:
            lease = exporter.lease_ref or leased_by.get(exporter.name, "")
            if lease and not exporter.served_lease:
                actions.append(MarkServed(exporter.name, lease))

    if obs.problem is None:
        # Instances leaving on their own account: finished, released, fenced earlier.
        def remove(exporter: ExporterView, fence: bool, why: str) -> Remove:
            own = pods_of.get(exporter.identity, ())
            pods = tuple((p.name, p.uid) for p in own if not p.deleting)
            return Remove(exporter.name, fence, why, exporter.uid, pods)

        for exporter in members[Bucket.TERMINATING]:
            if not exporter.deleting:  # not being deleted: its Pods finished (classify)
                actions.append(
                    remove(exporter, exporter.enabled, "its Pod finished (ExitAndReplace)")
                )
        # The pool's memory first: a failed instance of the current revision leaves only
        # once the memory holds its failure (a pass that writes it removes none).
        remembering = backoff != pool.backoff
        if remembering:
            actions.append(RememberBackoff(backoff, _remember_why(backoff, pool.backoff, revision)))
            requeue = _sooner(requeue, REMEMBERED_REQUEUE)
        # Failed instances: the newest stays as the record of the backoff until its delay
        # is over; the others go now.
        for exporter in members[Bucket.FAILED]:
            why = f"failed before serving ({backoff.quote if backoff else ''})"
            if exporter not in current:
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
                    requeue = _sooner(requeue, backoff.retry_at - now)
            else:
                actions.append(remove(exporter, exporter.enabled, "an earlier failure"))
        leaving = "reclaimPolicy Retain keeps it" if retain else "ExitAndReplace replaces it"
        for exporter in members[Bucket.RELEASED]:
            why = f"served lease {served_lease(exporter)}; {leaving}"
            actions.append(Retain(exporter.name, why) if retain else remove(exporter, True, why))
        for exporter in members[Bucket.DRAINING]:
            if exporter.fenced and not is_busy(exporter, leased_by):
                fenced = remove(exporter, False, "fenced by the pool, not busy")
                actions.append(replace(fenced, event=SCALE_DOWN))

        # Workload upkeep of instances that stay: replace finished Pods, create missing ones
        # once credentials allow, keep the running ones' rendered objects current.
        for pod in orphans:
            if not pod.deleting:  # one delete per Pod: a deleting one is left to finish
                actions.append(DeletePod(pod.name, "its Exporter is not in the pool", pod.uid))
        held = {pod.name for pod in orphans}  # names a new Pod cannot take yet
        for bucket in _STAYING:
            for exporter in members[bucket]:
                own = tuple(pods_of.get(exporter.identity, ()))
                live = [pod for pod in own if not pod.deleting]
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
                    actions.extend(
                        DeletePod(pod.name, "finished; a new Pod follows", pod.uid) for pod in live
                    )
                elif pods_going(own):
                    waits.append(Wait(f"the Pod {own[0].name} is being deleted; a new one follows"))
                else:
                    keep_current.append(exporter.name)
        if awaiting:
            # By name: the status message names the first, and the caches hand the
            # instances over in no particular order (a process would rewrite another's).
            awaiting.sort()
            requeue = AWAITING_REQUEUE

        deficit = desired - capacity
        room = ceiling - owned if ceiling else deficit
        creates = max(0, min(deficit, room))
        if refused and (creates or withheld):
            waits.append(Wait(refused))
            creates = 0
        # Room held by instances on their way out (a failed one waiting out its delay, a
        # released one) comes back by itself: maxReplicas limits nothing there.
        if ceiling and deficit > room + _leaving(count):
            ceiling_blocks = True
        step = 0
        if creates and (backoff is not None or probing):
            # Failing: one probe instance at a time, once the delay is over.
            due = backoff is None or now >= backoff.retry_at
            creates = 1 if due and not probing else 0
            if backoff is not None:
                step = backoff.failures
                if not due:
                    requeue = _sooner(requeue, backoff.retry_at - now)
        if creates:
            why = _shortfall(pool, count, warm, pending)
            if creates < deficit:
                why += f", room for {creates} under maxReplicas {ceiling}"
            elif desired < wanted:
                why += f", capped at maxReplicas {ceiling}"
            if step:
                why += f"; probe after {step} failure(s) in a row"
            # First in the plan: a replacement's boot is what a lease may be waiting for,
            # and every other step of the pass (served marks, Pods, status) can follow it.
            new = [CreateExporter(generate_name(pool.name), why, step, revision)] * creates
            actions[:0] = new
            scale_note = (SCALING_UP, f"creating {creates} instance(s) towards {desired}")

        candidates = _newest_first(members[Bucket.PROVISIONING]) + _newest_first(
            members[Bucket.AVAILABLE]
        )
        surplus = min(capacity - desired, len(candidates))
        if surplus > 0:
            since = pool.surplus_since or now
            if pool.surplus_since is None:
                actions.append(SetSurplusSince(now, f"capacity {capacity}, desired {desired}"))
            deadline = since + pool.cooldown
            why = f"surplus since {format_time(since)}, cooldown {format_duration(pool.cooldown)}"
            victims = [
                replace(remove(e, True, why), event=SCALE_DOWN) for e in candidates[:surplus]
            ]
            if now >= deadline:
                actions.extend(victims)
                scale_note = (SCALING_DOWN, f"removing {surplus} instance(s) towards {desired}")
            else:
                waits.extend(Wait(why, victim, deadline) for victim in victims)
                requeue = _sooner(requeue, deadline - now)
                scale_note = (
                    SCALE_DOWN_COOLDOWN,
                    f"{surplus} surplus instance(s) since {format_time(since)}; "
                    f"scale down at {format_time(deadline)}",
                )
        elif pool.surplus_since is not None:
            actions.append(SetSurplusSince(None, "no surplus now"))
    else:
        waits.append(Wait(obs.problem[1]))
        if pool.surplus_since is not None:
            # While broken nothing scales; after the repair the cooldown starts afresh, so
            # fixing a class never triggers an immediate scale-down.
            actions.append(SetSurplusSince(None, f"scaling stopped ({obs.problem[0]})"))
    ceiling_note = (
        f"{wanted} instance(s) wanted, maxReplicas is {ceiling}" if ceiling_blocks else ""
    )
    if ceiling_note and obs.problem is None:
        waits.append(Wait(ceiling_note))

    if awaiting and scale_note[0] not in (SCALING_UP, SCALING_DOWN):
        first = awaiting[0]
        scale_note = (
            WAITING_FOR_CREDENTIALS,
            f"{len(awaiting)} instance(s) wait for credentials from Jumpstarter's controller; "
            f"{first}: {obs.awaiting[first]}",
        )
        if condition_of(pool.status, "Progressing").get("reason") != WAITING_FOR_CREDENTIALS:
            actions.append(RecordEvent(WAITING_FOR_CREDENTIALS, scale_note[1]))
    degraded = _degraded(pool.status, backoff, probing)
    # One Event per step: a step the memory (or, while its cache lags, the status) holds
    # was told already.
    if (
        backoff is not None
        and obs.problem is None
        and (remembered is None or backoff.failures > remembered.failures)
        and backoff.step_note not in str(condition_of(pool.status, "Degraded").get("message"))
    ):
        actions.append(RecordEvent(BACK_OFF, degraded[1], warning=True))
    status = build_status(
        _counters(obs, members, pods_of),
        selector_string(pool.selector)
        if pool.selector is not None
        else selector_string({"matchLabels": {SET_LABEL: pool.name}}),
        _conditions(
            obs,
            count,
            desired,
            warm,
            ceiling_note,
            scale_note,
            wffc,
            degraded,
            any(p.phase == "Pending" and not p.deleting for p in obs.pods),
        )
        + ([obs.images] if obs.images is not None else []),
        pool.status,
        pool.generation,
        now,
    )
    if status != dict(pool.status):
        actions.append(PatchStatus(status))
        actions.extend(transition_events(pool.status, status))  # once the status is written
    return Plan(
        tuple(actions),
        status,
        desired,
        count,
        pending,
        requeue,
        keep_current=tuple(keep_current),
        awaiting=tuple(awaiting),
        warm=warm,
        at_ceiling=ceiling_blocks,
        waits=tuple(waits),
    )


def _shortfall(pool: PoolView, count: Mapping[Bucket, int], warm: int, pending: int) -> str:
    """Why the pool needs more instances, in the terms that set `desired`: the floor, or
    the warm buffer and pending leases against what is ready or booting (busy instances
    count on both sides of that comparison, so they are left out)."""
    busy = count[Bucket.BUSY]
    if pool.min_replicas > busy + warm + pending:
        terms = [f"minReplicas {pool.min_replicas}"] + ([f"busy {busy}"] if busy else [])
    else:
        terms = [f"warm buffer {warm}"] if warm or not pending else []
        terms += [f"pending leases {pending}"] if pending else []
    terms.append(f"available {count[Bucket.AVAILABLE]}")
    if count[Bucket.PROVISIONING]:
        terms.append(f"provisioning {count[Bucket.PROVISIONING]}")
    return ", ".join(terms)


def _leaving(count: Mapping[Bucket, int]) -> int:
    """Instances on their way out of the pool."""
    return count[Bucket.TERMINATING] + count[Bucket.RELEASED] + count[Bucket.FAILED]


def _sooner(current: timedelta | None, candidate: timedelta) -> timedelta:
    return candidate if current is None else min(current, candidate)


def _ended(pod: PodView) -> tuple[bool, datetime]:
    """Sort key: the Pod that ended last (by the exporter's end, else creation)."""
    return pod.done, pod.finished_at or pod.created or datetime.min.replace(tzinfo=UTC)


def _remember_why(backoff: Backoff | None, before: Backoff | None, revision: str) -> str:
    if backoff is not None:
        return f"{backoff.step_note}, the last {backoff.instance} at {format_time(backoff.at)}"
    if before is not None and before.revision not in ("", revision):
        return "the spec or class changed"
    return "an instance registered since the last failure"


def _degraded(
    status: Mapping[str, object], backoff: Backoff | None, probing: list[str]
) -> tuple[str, str]:
    """(reason, message) of Degraded=True for a failing pool, ("", "") when it is not.
    The message quotes the pool's memory of its last failure, so it stays while a probe
    boots. A probe without that memory (made by an earlier version) keeps what was said."""
    if backoff is not None:
        return PODS_FAILING, backoff.message()
    if probing:
        before = condition_of(status, "Degraded")
        if before.get("reason") == PODS_FAILING:
            return PODS_FAILING, str(before.get("message", ""))
        return PODS_FAILING, f"probing: {probing[0]} starts after earlier failures"
    return "", ""


def _counters(
    obs: Observation,
    members: Mapping[Bucket, list[ExporterView]],
    pods_of: Mapping[str, list[PodView]],
) -> Counters:
    exporters = obs.exporters
    leased_by = {lease.exporter for lease in obs.leases if lease.exporter and not lease.ended}
    live = [e for e in exporters if not e.deleting]
    by_identity = {e.identity: e for e in exporters}
    phases: dict[str, int] = defaultdict(int)
    for pod in obs.pods:
        owner = by_identity.get(pod.owner)
        if pod.going and pod.phase == "Failed":
            phases["Unknown"] += 1  # ended because it was deleted: it did not fail
        elif pod.phase == "Failed" or (owner is not None and failed(owner, pod)):
            phases["Failed"] += 1
        elif pod.phase == "Running" and pod.exited:
            phases["Unknown"] += 1  # the exporter exited; the sidecar is stopping
        else:
            phases[pod.phase] += 1

    def ready(e: ExporterView) -> bool:
        return is_ready(e) and not pods_finished(tuple(pods_of.get(e.identity, ())))

    return Counters(
        replicas=len(exporters),
        available=len(members[Bucket.AVAILABLE]),
        ready=sum(1 for e in live if ready(e)),
        unavailable=sum(1 for e in live if e.enabled and not ready(e)),
        leased=sum(1 for e in exporters if is_leased(e, leased_by)),
        active=len(members[Bucket.BUSY]),
        idle=sum(1 for e in live if e.online and e.enabled and not is_leased(e, leased_by)),
        offline=sum(1 for e in live if e.enabled and not e.online),
        disabled=sum(1 for e in exporters if not e.enabled),
        pods_pending=phases["Pending"],
        pods_running=phases["Running"],
        pods_failed=phases["Failed"],
        pods_unknown=phases["Unknown"] + phases["Succeeded"],
    )


def _conditions(
    obs: Observation,
    count: Mapping[Bucket, int],
    desired: int,
    warm: int,
    ceiling_note: str,
    scale_note: tuple[str, str],
    wffc: bool,
    failing: tuple[str, str],
    pods_pending: bool,
) -> list[ConditionSpec]:
    available = count[Bucket.AVAILABLE]
    if obs.problem is not None:
        reason, message = obs.problem
        return [
            ConditionSpec("Available", available >= warm and available > 0, reason, message),
            ConditionSpec("Progressing", False, reason, "scaling stopped: " + message),
            ConditionSpec("Degraded", True, reason, message),
            ConditionSpec("ScalingLimited", True, reason, "scaling stopped: " + message),
        ]
    ready = f"{available} of {warm} warm instance(s) ready"
    if wffc:
        avail = ConditionSpec(
            "Available", True, WAIT_FOR_FIRST_CONSUMER, "instances are created on lease request"
        )
    elif warm == 0:
        avail = ConditionSpec("Available", True, NO_REPLICAS_REQUIRED, ready)
    elif available >= warm:
        avail = ConditionSpec("Available", True, MINIMUM_AVAILABLE, ready)
    else:
        avail = ConditionSpec("Available", False, MINIMUM_UNAVAILABLE, ready)
    reason, message = scale_note
    leaving = _leaving(count)
    if reason in (SCALING_UP, SCALING_DOWN, WAITING_FOR_CREDENTIALS):
        progressing = ConditionSpec("Progressing", True, reason, message)
    elif count[Bucket.PROVISIONING] or leaving:
        booting = PODS_STARTING if pods_pending else REPLICAS_NOT_READY
        progressing = ConditionSpec(
            "Progressing",
            True,
            booting if count[Bucket.PROVISIONING] else RECYCLING,
            f"{count[Bucket.PROVISIONING]} provisioning, {leaving} leaving",
        )
    elif reason:
        progressing = ConditionSpec("Progressing", False, reason, message)
    else:
        progressing = ConditionSpec(
            "Progressing", False, ALL_READY, f"{desired} instance(s) desired"
        )
    limited = (
        ConditionSpec("ScalingLimited", True, AT_MAX, ceiling_note)
        if ceiling_note
        else ConditionSpec(
            "ScalingLimited", False, WITHIN_LIMITS, "within minReplicas and maxReplicas"
        )
    )
    degraded = (
        ConditionSpec("Degraded", True, *failing)
        if failing[0]
        else ConditionSpec("Degraded", False, ALL_HEALTHY, "")
    )
    return [avail, progressing, degraded, limited]
