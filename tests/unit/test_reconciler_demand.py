"""The demand estimator (`pool.rules.demand`), its memory (`pool.model.demand`)
and the planner's demand stage: scheduled Leases and the `warm-buffer: auto` pool."""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from api.warmbuffer import WarmBufferSettings
from pool.model.actions import CreateExporter, RecordEvent, RememberDemand
from pool.model.demand import DemandMemory, decode_demand, encode_demand
from pool.model.reasons import WARM_BUFFER_CHANGED
from pool.model.views import LeaseView, Observation
from pool.rules.demand import (
    RISK,
    advance,
    boot_p95,
    estimate,
    poisson_quantile,
    sized_buffer,
)
from pool.rules.explain import explain
from pool.rules.planner import Plan, plan
from pool.rules.stages.demand import WRITE_EVERY
from tests.unit.test_reconciler_support import T0, klass, pool, ready

WINDOW = timedelta(minutes=10)
AUTO = WarmBufferSettings(auto=True, boot_estimate=timedelta(minutes=3))
MATCH = {"matchLabels": {"board": "qemu"}}

rates = st.floats(min_value=0, max_value=2, allow_nan=False)  # leases a second
boots = st.floats(min_value=1, max_value=1800, allow_nan=False)
buffers = st.integers(min_value=0, max_value=60)


def _tail(mean: float, b: int) -> float:
    """P(Poisson(mean) > b), summed plainly."""
    return 1 - sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(b + 1))


# -- the quantile -----------------------------------------------------------------------


def test_quantile_is_the_smallest_buffer_within_the_risk() -> None:
    for mean in (0.1, 0.5, 1.0, 1.5, 3.0, 7.5, 20.0):
        b = poisson_quantile(mean)
        assert _tail(mean, b) <= RISK + 1e-9
        assert b == 0 or _tail(mean, b - 1) > RISK


def test_no_demand_no_buffer() -> None:
    assert poisson_quantile(0.0) == 0


@given(rates, rates, boots, buffers)
def test_monotone_in_rate(low: float, high: float, boot: float, current: int) -> None:
    low, high = sorted((low, high))
    assert sized_buffer(low * boot, current, 0, 0) <= sized_buffer(high * boot, current, 0, 0)


@given(rates, boots, boots, buffers)
def test_monotone_in_boot_time(rate: float, short: float, long: float, current: int) -> None:
    short, long = sorted((short, long))
    one = DemandMemory(T0, rate, (short,), current)
    other = DemandMemory(T0, rate, (long,), current)
    assert (
        estimate(one, WINDOW, timedelta(0), 0, 0).buffer
        <= estimate(other, WINDOW, timedelta(0), 0, 0).buffer
    )


@given(rates, boots, buffers, st.integers(0, 10), st.integers(0, 40))
def test_never_below_the_floor_nor_above_the_ceiling(
    rate: float, boot: float, current: int, floor: int, ceiling: int
) -> None:
    b = sized_buffer(rate * boot, current, floor, ceiling)
    assert b >= floor
    if ceiling:
        assert b <= max(ceiling, floor)


@given(rates, boots, buffers, st.floats(min_value=0.81, max_value=1.0))
def test_hysteresis_holds_a_buffer_once_reached(
    rate: float, boot: float, current: int, dip: float
) -> None:
    mean = rate * boot
    settled = sized_buffer(mean, current, 0, 0)
    assert sized_buffer(mean, settled, 0, 0) == settled  # no flapping at a steady rate
    risen = sized_buffer(mean, 0, 0, 0)
    assert sized_buffer(mean * dip, risen, 0, 0) == risen  # a dip within the band: kept


def test_hysteresis_rises_at_once_and_falls_only_past_its_band() -> None:
    mean = 2.0
    held = sized_buffer(mean, 0, 0, 0)
    assert held == poisson_quantile(mean)  # rises at once
    assert sized_buffer(mean * 0.9, held, 0, 0) == held  # a small dip: kept
    assert sized_buffer(mean * 0.1, held, 0, 0) < held  # quiet: falls


@given(
    st.builds(
        DemandMemory,
        at=st.integers(0, 10**9).map(lambda s: T0 + timedelta(seconds=s)),
        rate=rates,
        boots=st.lists(boots, max_size=20).map(tuple),
        buffer=buffers,
    )
)
def test_memory_round_trips(memory: DemandMemory) -> None:
    assert decode_demand(encode_demand(memory)) == memory


def test_unreadable_memory_is_forgotten() -> None:
    at = '"at":"2026-01-01T00:00:00Z"'
    unreadable = (
        "",
        "{",
        '{"at":"x"}',
        "{" + at + ',"rate":-1,"boots":[],"buffer":0}',
        "{" + at + ',"rate":1,"boots":["a"],"buffer":0}',
        None,
        5,
    )
    for text in unreadable:
        assert decode_demand(text) is None


# -- learning ---------------------------------------------------------------------------


@given(st.lists(st.integers(1, 3600), max_size=30), st.integers(1, 3599))
def test_learning_in_steps_equals_learning_at_once(offsets: list[int], split: int) -> None:
    arrivals = [T0 + timedelta(seconds=s) for s in offsets]
    start, middle, end = DemandMemory(T0), T0 + timedelta(seconds=split), T0 + timedelta(hours=1)
    once = advance(start, arrivals, (), end, WINDOW)
    steps = advance(advance(start, arrivals, (), middle, WINDOW), arrivals, (), end, WINDOW)
    assert math.isclose(once.rate, steps.rate, rel_tol=1e-9, abs_tol=1e-12)


def test_a_burst_raises_the_rate_and_a_quiet_night_forgets_it() -> None:
    burst = [T0 + timedelta(seconds=i) for i in range(10)]
    start = DemandMemory(T0 - timedelta(seconds=1))
    after = advance(start, burst, (), T0 + timedelta(seconds=10), WINDOW)
    assert after.rate > 9 / WINDOW.total_seconds()
    night = advance(after, [], (), T0 + timedelta(hours=8), WINDOW)
    assert night.rate < 1e-12


def test_boot_p95_from_the_latest_boots_else_the_estimate() -> None:
    assert boot_p95((), timedelta(minutes=3)) == timedelta(minutes=3)
    seen = tuple(float(s) for s in range(1, 101))
    assert boot_p95(seen, timedelta(minutes=3)) == timedelta(seconds=95)
    learned = advance(DemandMemory(T0), (), [(T0 + timedelta(seconds=s), s) for s in range(1, 40)],
                      T0 + timedelta(minutes=1), WINDOW)  # fmt: skip
    assert len(learned.boots) == 20 and learned.boots[-1] == 39.0


# -- the planner ------------------------------------------------------------------------


def _plan(now_s: int = 0, leases: tuple[LeaseView, ...] = (), **kw: object) -> Plan:
    obs = Observation(pool=pool(**kw), klass=klass(), leases=leases)
    return plan(obs, T0 + timedelta(seconds=now_s))


def test_a_scheduled_lease_counts_from_its_begin_less_the_boot_time() -> None:
    begin = T0 + timedelta(minutes=10)
    lease = LeaseView("later", MATCH, created=T0, begin=begin)
    sizing = WarmBufferSettings(boot_estimate=timedelta(minutes=3))
    early = _plan(0, (lease,), min_available=0, sizing=sizing)
    assert early.pending_leases == 0 and CreateExporter("pool-") not in early.actions
    assert early.requeue_after == timedelta(minutes=7)
    assert any(
        "scheduled lease later" in str(step) and "2026-01-01T00:07:00Z" in str(step)
        for step in explain(early)
    )
    due = _plan(7 * 60, (lease,), min_available=0, sizing=sizing)
    assert due.pending_leases == 1
    assert CreateExporter("pool-") in due.actions


def test_a_scheduled_lease_uses_the_boots_the_pool_has_seen() -> None:
    lease = LeaseView("later", MATCH, created=T0, begin=T0 + timedelta(minutes=10))
    quick = ready("a", registered_at=T0 + timedelta(seconds=30))  # booted in 30s
    obs = Observation(
        pool=pool(min_available=1), klass=klass(), exporters=(quick,), leases=(lease,)
    )
    result = plan(obs, T0)
    assert result.requeue_after == timedelta(minutes=9, seconds=30)


def test_a_lease_already_begun_or_served_counts_as_always() -> None:
    begun = LeaseView("now", MATCH, created=T0, begin=T0)
    assert _plan(0, (begun,), min_available=0).pending_leases == 1


def test_a_pool_without_the_annotation_writes_no_memory() -> None:
    leases = tuple(LeaseView(f"l{i}", MATCH, exporter="x", created=T0) for i in range(5))
    result = _plan(60, leases, min_available=1)
    assert not [a for a in result.actions if isinstance(a, RememberDemand)]
    assert result.demand is None and result.warm == 1


def test_an_auto_pool_sizes_its_buffer_from_a_burst() -> None:
    burst = tuple(LeaseView(f"l{i}", MATCH, exporter=f"x{i}", created=T0) for i in range(10))
    result = _plan(30, burst, min_available=1, sizing=AUTO)
    assert result.demand is not None and result.warm == result.demand.buffer > 1
    written = [a for a in result.actions if isinstance(a, RememberDemand)]
    assert written and written[0].memory.buffer == result.warm
    events = [a for a in result.actions if isinstance(a, RecordEvent)]
    assert any(e.reason == WARM_BUFFER_CHANGED for e in events)
    assert "from demand" in str(result.status["conditions"][0]["message"])  # type: ignore[index]
    assert result.requeue_after is not None and result.requeue_after <= WRITE_EVERY


def test_an_auto_pool_writes_its_memory_at_most_once_a_minute() -> None:
    burst = tuple(LeaseView(f"l{i}", MATCH, exporter=f"x{i}", created=T0) for i in range(10))
    first = _plan(30, burst, min_available=1, sizing=AUTO)
    memory = next(a for a in first.actions if isinstance(a, RememberDemand)).memory
    soon = _plan(60, burst, min_available=1, sizing=AUTO, demand=memory)
    assert not [a for a in soon.actions if isinstance(a, RememberDemand)]
    assert soon.warm == first.warm  # the buffer holds without a write
    later = _plan(95, burst, min_available=1, sizing=AUTO, demand=memory)
    assert [a for a in later.actions if isinstance(a, RememberDemand)]


def test_leases_gone_before_the_next_memory_write_stay_learned() -> None:
    """An ended Lease goes with its recycled Exporter, often within the minute between two
    memory writes: the next pass starts from what the last one learned, so the burst's
    arrivals stay in the rate and the buffer holds (it fell back to the floor before)."""
    memory = DemandMemory(T0, 0.0, (), 1)  # written at T0
    arrived = T0 + timedelta(seconds=5)
    burst = tuple(LeaseView(f"l{i}", MATCH, exporter=f"x{i}", created=arrived) for i in range(10))
    seen = _plan(20, burst, min_available=1, sizing=AUTO, demand=memory)
    assert seen.learned is not None and seen.warm > 1
    assert not [a for a in seen.actions if isinstance(a, RememberDemand)]  # not due yet
    gone = _plan(30, (), min_available=1, sizing=AUTO, demand=memory, learned=seen.learned)
    assert gone.warm == seen.warm and gone.demand is not None and gone.demand.rate > 0
    forgotten = _plan(30, (), min_available=1, sizing=AUTO, demand=memory)  # a new process
    assert forgotten.warm == 1


def test_the_memory_written_later_wins_over_an_older_learned_one() -> None:
    """A takeover or restart: whatever is newer of the memory and what was learned."""
    old = DemandMemory(T0, 0.0, (), 1)
    newer = DemandMemory(T0 + timedelta(seconds=50), 0.5, (), 4)
    result = _plan(55, (), min_available=1, sizing=AUTO, demand=newer, learned=old)
    assert result.demand is not None and result.demand.rate > 0.4


def test_an_auto_pool_falls_back_to_its_floor_when_arrivals_stop() -> None:
    burst = tuple(LeaseView(f"l{i}", MATCH, exporter=f"x{i}", created=T0) for i in range(10))
    first = _plan(30, burst, min_available=1, sizing=AUTO)
    memory = next(a for a in first.actions if isinstance(a, RememberDemand)).memory
    quiet = _plan(3 * 3600, burst, min_available=1, sizing=AUTO, demand=memory)
    assert quiet.warm == 1


def test_an_auto_pool_keeps_its_ceiling() -> None:
    burst = tuple(LeaseView(f"l{i}", MATCH, created=T0) for i in range(40))
    result = _plan(30, burst, min_available=0, max_replicas=5, sizing=AUTO)
    assert result.warm <= 5 and result.desired <= 5


def test_a_quiet_auto_pool_stops_writing_and_waking() -> None:
    quiet = DemandMemory(T0, 0.0, (), 1)
    result = _plan(3600, (), min_available=1, sizing=AUTO, demand=quiet)
    assert not [a for a in result.actions if isinstance(a, RememberDemand)]
    assert result.requeue_after is None and result.warm == 1


def test_an_auto_pool_of_a_wait_for_first_consumer_class_sizes_no_buffer() -> None:
    """WaitForFirstConsumer keeps no instance warm: `warm-buffer: auto` has no effect (the
    webhook warns of it), and neither the plan, the memory nor Available claims a buffer."""
    burst = tuple(LeaseView(f"l{i}", MATCH, exporter=f"x{i}", created=T0) for i in range(10))
    obs = Observation(pool=pool(min_available=0, sizing=AUTO), klass=klass("WaitForFirstConsumer"),
                      leases=(*burst, LeaseView("wants", MATCH, created=T0)))  # fmt: skip
    result = plan(obs, T0 + timedelta(seconds=30))
    assert result.demand is None and result.warm == 0
    assert not [a for a in result.actions if isinstance(a, RememberDemand)]
    events = [a.reason for a in result.actions if isinstance(a, RecordEvent)]
    assert WARM_BUFFER_CHANGED not in events
    assert result.desired == 1  # the pending Lease's instance, no more
    available = result.status["conditions"][0]  # type: ignore[index]
    assert available["reason"] == "WaitForFirstConsumer"
    assert "from demand" not in available["message"]
    assert not any("demand" in str(step) for step in explain(result))
