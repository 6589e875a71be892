"""One Lease counts for one pool: whichever sets its selector matches, exactly one of them,
the oldest (then by name), counts a pending Lease, and every pool works it out alike."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pool.model.keys import instance_labels
from pool.model.views import LeaseView, Observation, PoolClaim
from pool.rules.claims import claimant, counts_lease, overlap
from pool.rules.planner import plan
from tests.unit.test_reconciler_support import T0, klass, pool

KEYS, VALUES = ("board", "arch"), ("a", "b")

labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
pools = st.lists(
    st.tuples(st.integers(0, 3), labels),  # (minutes after T0 it was created, template labels)
    min_size=1,
    max_size=5,
)
selectors = st.one_of(
    st.builds(lambda m: {"matchLabels": m}, labels),
    st.builds(
        lambda k, vs: {"matchExpressions": [{"key": k, "operator": "In", "values": vs}]},
        st.sampled_from(KEYS),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
    ),
)


def _claims(specs: list[tuple[int, dict[str, str]]]) -> list[PoolClaim]:
    return [
        PoolClaim(f"p{i}", T0 + timedelta(minutes=minute), instance_labels(f"p{i}", template))
        for i, (minute, template) in enumerate(specs)
    ]


@settings(max_examples=300, deadline=None)
@given(specs=pools, selector=selectors, order=st.randoms(use_true_random=False))
def test_exactly_one_matching_pool_counts_a_lease_whatever_the_order(
    specs: list[tuple[int, dict[str, str]]], selector: dict[str, Any], order: Any
) -> None:
    claims = _claims(specs)
    counting = set()
    for me in claims:
        rivals = [c for c in claims if c is not me]
        order.shuffle(rivals)  # each replica lists the sets in its own order
        if counts_lease(selector, me, rivals):
            counting.add(me.name)
    first = claimant(selector, claims)
    assert counting == ({first} if first is not None else set())
    matching = [c for c in claims if counts_lease(selector, c, [])]  # alone, it would count
    if matching:
        assert first == min(matching, key=lambda c: c.seniority).name
    else:
        assert first is None


@settings(max_examples=150, deadline=None)
@given(specs=pools, selectors_=st.lists(selectors, max_size=4))
def test_the_planners_of_all_pools_together_count_each_pending_lease_once(
    specs: list[tuple[int, dict[str, str]]], selectors_: list[dict[str, Any]]
) -> None:
    claims = _claims(specs)
    leases = tuple(LeaseView(f"l{i}", s) for i, s in enumerate(selectors_))
    counted = 0
    for me, (_, template) in zip(claims, specs, strict=True):
        view = pool(name=me.name, template_labels=template, created=me.created, min_available=0)
        rivals = tuple(c for c in claims if c is not me)
        result = plan(Observation(pool=view, klass=klass(), leases=leases, rivals=rivals), T0)
        counted += result.pending_leases
    assert counted == sum(1 for lease in leases if claimant(lease.selector, claims) is not None)


def test_the_older_set_counts_and_a_tie_goes_by_name() -> None:
    older = PoolClaim("b", T0, instance_labels("b", {"board": "a"}))
    newer = PoolClaim("a", T0 + timedelta(seconds=1), instance_labels("a", {"board": "a"}))
    twin = PoolClaim("a", T0, instance_labels("a", {"board": "a"}))
    wanted = {"matchLabels": {"board": "a"}}
    assert claimant(wanted, [newer, older]) == "b"
    assert claimant(wanted, [older, twin]) == "a"
    assert not counts_lease(wanted, newer, [older]) and counts_lease(wanted, older, [newer])
    # A selector only one set matches is that set's, whatever its age.
    own = {"matchLabels": {"exporterset": "x"}}
    assert not counts_lease(own, older, [newer])


def test_sets_overlap_when_either_selector_matches_the_others_instances() -> None:
    def claim(name: str, template: dict[str, str], selector: dict[str, str]) -> PoolClaim:
        return PoolClaim(name, T0, instance_labels(name, template), {"matchLabels": selector})

    pool_a = claim("a", {"pool": "poolA", "arch": "x86"}, {"pool": "poolA"})
    pool_b = claim("b", {"pool": "poolA", "arch": "arm"}, {"pool": "poolA", "arch": "arm"})
    other = claim("c", {"pool": "poolC"}, {"pool": "poolC"})
    assert overlap(pool_a, pool_b) and overlap(pool_b, pool_a)
    assert not overlap(pool_a, other)
