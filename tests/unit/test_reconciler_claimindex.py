"""The claim index answers as a scan of the namespace would: the sets a selector matches,
those whose selector matches some labels, and those overlapping a set, whatever was put,
replaced and dropped before (it only narrows what the rule then checks)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pool.model.keys import instance_labels
from pool.model.views import PoolClaim
from pool.rules.claimindex import ClaimIndex, anchor, anchors_of
from pool.rules.claims import matches, overlap
from tests.unit.test_reconciler_support import T0

KEYS, VALUES = ("board", "arch"), ("a", "b")
NS = "lab"

labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
selectors = st.one_of(
    st.builds(lambda m: {"matchLabels": m}, labels),
    st.builds(
        lambda k, op, vs: {"matchExpressions": [{"key": k, "operator": op, "values": vs}]},
        st.sampled_from(KEYS),
        st.sampled_from(("In", "NotIn")),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
    ),
    st.just({"matchLabels": "not a map"}),  # unreadable
    st.none(),
)
# (set number, minutes after T0, template labels, selector; None: the set is dropped)
writes = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 3), labels, selectors, st.booleans()),
    max_size=20,
)


def _claim(number: int, minute: int, template: dict[str, str], selector: Any) -> PoolClaim:
    name = f"p{number}"
    created = T0 + timedelta(minutes=minute)
    return PoolClaim(name, created, instance_labels(name, template), selector)


@settings(max_examples=300, deadline=None)
@given(history=writes, selector=selectors, probe=labels)
def test_the_index_answers_as_a_scan_would(
    history: list[tuple[int, int, dict[str, str], Any, bool]], selector: Any, probe: dict[str, str]
) -> None:
    index, live = ClaimIndex(), dict[str, PoolClaim]()
    index.put("elsewhere", _claim(0, 0, {}, {}))  # another namespace is never an answer
    for number, minute, template, own, dropped in history:
        claim = _claim(number, minute, template, own)
        if dropped:
            index.drop(NS, claim.name)
            live.pop(claim.name, None)
        else:
            index.put(NS, claim)
            live[claim.name] = claim
    scan = sorted(live.values(), key=lambda c: c.name)
    assert len(index) == len(live) + 1
    assert index.matching(NS, selector) == [c for c in scan if matches(selector, c.labels)]
    assert index.matching(NS, selector, unreadable=True) == [
        c for c in scan if matches(selector, c.labels, unreadable=True)
    ]
    assert index.selecting(NS, probe) == [c for c in scan if matches(c.selector, probe)]
    if matches(selector, probe):  # a Lease indexed by its anchor is found from the labels
        assert anchor(selector) in anchors_of(probe)
    for me in scan:
        assert index.overlapping(NS, me) == [
            c for c in scan if c.name != me.name and overlap(me, c)
        ]


def test_a_selector_is_anchored_on_its_least_label_pair_or_on_none() -> None:
    assert anchor({"matchLabels": {"board": "a", "arch": "x86"}}) == ("arch", "x86")
    assert anchor({"matchExpressions": [{"key": "board", "operator": "Exists"}]}) is None
    assert anchor({"matchLabels": "not a map"}) is None
    assert anchor(None) is None
