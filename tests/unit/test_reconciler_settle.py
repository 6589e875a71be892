"""A removal takes two passes: one fences the instance (saying what for), and a pass at
least FENCE_SETTLE later deletes it for that reason, unless a Lease took it meanwhile,
which lifts the fence (`pool.rules.stages.settle`, `.departures`)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest

from pool.model.actions import LiftFence, Remove
from pool.model.keys import ROLLOUT
from pool.model.reasons import FENCE_LIFTED, RECYCLE, SCALE_DOWN
from pool.model.views import ExporterView, LeaseView
from pool.rules.rollout import ROLLOUT_REMOVAL
from pool.rules.stages.settle import FENCE_SETTLE
from tests.unit.test_reconciler_planner import of, run
from tests.unit.test_reconciler_protection import LateLeaseKube, _executor
from tests.unit.test_reconciler_step_failures import INSTANCE, _exporter
from tests.unit.test_reconciler_support import T0, ready, standby

S = timedelta(seconds=1)
SERVED = ready("pool-0", served_lease="l1")  # ExitAndReplace: it leaves once released
STANDBY = standby()  # the pool's last instance leaves: its standby keeps Leases alive


def _fenced(exporter: ExporterView, at: object, fenced_for: str) -> ExporterView:
    return replace(exporter, enabled=False, fenced=True, fenced_at=at, fenced_for=fenced_for)


def test_a_removal_fences_in_one_pass_and_deletes_once_the_fence_has_settled() -> None:
    first = run([SERVED, STANDBY], min_available=0)
    (fence,) = of(first, Remove)
    why = "served lease l1; ExitAndReplace replaces it"
    assert (fence.fence, fence.event, fence.why) == (True, RECYCLE, why)
    assert first.requeue_after == FENCE_SETTLE  # the pass that deletes it
    fenced = _fenced(SERVED, T0, f"{RECYCLE}: {why}")
    early = run([fenced, STANDBY], min_available=0, now=T0 + FENCE_SETTLE - S)
    assert not of(early, Remove)
    (wait,) = early.waits
    assert wait.action == Remove("pool-0", False) and wait.at == T0 + FENCE_SETTLE
    assert wait.reason == "fenced at 2026-01-01T00:00:00Z: deleted once its fence has settled"
    assert early.requeue_after == S
    (delete,) = of(run([fenced, STANDBY], min_available=0, now=T0 + FENCE_SETTLE), Remove)
    assert (delete.fence, delete.event, delete.why) == (False, RECYCLE, why)


@pytest.mark.parametrize(
    ("fenced_for", "event", "why"),
    [
        ("ScaleDown: surplus since T, cooldown 5m", SCALE_DOWN, "surplus since T, cooldown 5m"),
        ("", SCALE_DOWN, "fenced by the pool, not busy"),  # fenced before FENCED_FOR
        ("Nonsense", SCALE_DOWN, "fenced by the pool, not busy"),
    ],
)
def test_the_delete_says_what_the_fence_was_for(fenced_for: str, event: str, why: str) -> None:
    fenced = _fenced(ready("pool-0"), T0 - FENCE_SETTLE, fenced_for)
    (delete,) = of(run([fenced], min_available=0), Remove)
    assert (delete.fence, delete.event, delete.why) == (False, event, why)


def test_a_lease_that_took_a_fenced_instance_lifts_its_fence() -> None:
    fenced = _fenced(ready("pool-0"), T0, "ScaleDown: surplus")
    lease = LeaseView("l1", {}, exporter="pool-0")
    result = run([fenced], min_available=0, leases=[lease], now=T0 + S)
    assert of(result, LiftFence) == [LiftFence("pool-0")]
    assert of(result, LiftFence)[0].why == "a Lease (l1) took it before the fence settled"
    assert not of(result, Remove) and not result.waits


def test_an_instance_a_person_disabled_is_left_alone() -> None:
    disabled = ready("pool-0", enabled=False)
    result = run([disabled], min_available=0)
    assert not of(result, Remove) and not of(result, LiftFence) and not result.waits


def test_a_lease_assigned_from_a_read_before_the_fence_keeps_its_instance() -> None:
    """The lease controller's pick, made before the fence, is written after it: the pass
    that would delete (no sooner than FENCE_SETTLE after) finds it and lifts the fence."""
    lag = 0.2
    assert FENCE_SETTLE.total_seconds() > lag
    kube = LateLeaseKube([_exporter(INSTANCE)], lag=lag)
    _executor(kube).run([Remove(INSTANCE, True, "surplus", event=SCALE_DOWN)])
    assert not kube.leases  # not yet written when the fence pass ended
    time.sleep(lag + 0.2)  # the settle, shortened to what this lease controller needs
    _executor(kube).run([Remove(INSTANCE, False, "surplus", event=SCALE_DOWN)])
    assert not [w for w in kube.writes if w[0] == "delete"]
    lifted = kube.patches[-1][1]
    assert lifted["spec"] == {"enabled": True}
    assert [e["reason"] for e in kube.events] == [FENCE_LIFTED]


def test_without_the_settle_that_lease_is_lost() -> None:
    """What the settle is for: a delete in the fence's own pass misses the pick."""
    kube = LateLeaseKube([_exporter(INSTANCE)], lag=0.2)
    executor = _executor(kube)
    executor.run([Remove(INSTANCE, True, "surplus", event=SCALE_DOWN)])
    executor.run([Remove(INSTANCE, False, "surplus", event=SCALE_DOWN)])
    assert ("delete", "exporters", INSTANCE) in kube.writes


def test_a_pause_lifts_the_fence_of_a_rollout_s_removal_only() -> None:
    """A pause holds what has not gone yet: the rollout's fence is lifted; a recycle's or
    a scale-down's fence is not the rollout's, and its instance still goes."""
    rollout = f"{RECYCLE}: {ROLLOUT_REMOVAL}3 instance(s) for 2 wanted, none booting"
    fenced = _fenced(ready("pool-0"), T0, rollout)
    paused = run([fenced], min_available=0, rollout_paused=True, now=T0 + FENCE_SETTLE)
    assert of(paused, LiftFence) == [LiftFence("pool-0")] and not of(paused, Remove)
    assert of(paused, LiftFence)[0].why == f"the rollout is paused ({ROLLOUT})"
    going = run([fenced], min_available=0, now=T0 + FENCE_SETTLE)
    assert of(going, Remove) == [Remove("pool-0", False)] and not of(going, LiftFence)
    for other in ("ScaleDown: surplus since T, cooldown 5m", f"{RECYCLE}: served lease l1"):
        kept = _fenced(ready("pool-0"), T0, other)
        result = run([kept], min_available=0, rollout_paused=True, now=T0 + FENCE_SETTLE)
        assert of(result, Remove) == [Remove("pool-0", False)] and not of(result, LiftFence)
