"""The one reading of a pool's memory annotations (`pool.model.memorycodec`), as the
backoff and the demand memory use it: malformed values are forgotten (None), never raised."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pool.model.backoff import Backoff, decode, encode
from pool.model.demand import DemandMemory, decode_demand, encode_demand
from pool.model.memorycodec import count, decode_memory, moment, number, text

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
BACKOFF = Backoff(2, AT, "pool-x7k2p", "exited", "abc.def")
DEMAND = DemandMemory(AT, 0.25, (31.0, 40.5), 2)
READERS: list[Callable[[object], object]] = [decode, decode_demand]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def _read(raw: Mapping[str, object]) -> tuple[datetime, int, float, str]:
    return moment(raw["at"]), count(raw["n"], least=1), number(raw["x"]), text(raw["s"])


GOOD = {"at": "2026-01-02T03:04:05.6Z", "n": 2, "x": 1.5, "s": "a"}


def test_a_good_value_is_read_to_whole_seconds() -> None:
    assert decode_memory(json.dumps(GOOD), _read) == (AT, 2, 1.5, "a")


@pytest.mark.parametrize(
    "value",
    [None, 7, b"{}", "", "not json", "{", "[1, 2]", '"text"', "null", "3", "[" * 100_000],
)
def test_a_value_that_is_not_a_json_object_is_none(value: object) -> None:
    assert decode_memory(value, _read) is None


@pytest.mark.parametrize("missing", sorted(GOOD))
def test_a_missing_key_is_none(missing: str) -> None:
    raw = {k: v for k, v in GOOD.items() if k != missing}
    assert decode_memory(json.dumps(raw), _read) is None


@pytest.mark.parametrize(
    ("key", "wrong"),
    [
        ("at", 5), ("at", None), ("at", "yesterday"), ("at", ["2026-01-02T03:04:05Z"]),
        ("n", True), ("n", 0), ("n", 1.0), ("n", "2"),
        ("x", -1), ("x", False), ("x", "1.5"), ("x", None),
        ("s", 3), ("s", None), ("s", ["a"]),
    ],
)  # fmt: skip
def test_a_key_of_a_wrong_type_is_none(key: str, wrong: object) -> None:
    assert decode_memory(json.dumps({**GOOD, key: wrong}), _read) is None


def test_infinite_numbers_are_none() -> None:
    assert decode_memory(json.dumps({**GOOD, "x": float("inf")}), _read) is None
    assert decode_memory(json.dumps({**GOOD, "x": float("nan")}), _read) is None


@pytest.mark.parametrize(("memory", "write", "read"), [
    (BACKOFF, encode, decode), (DEMAND, encode_demand, decode_demand),
])  # fmt: skip
def test_both_memories_read_back_what_they_wrote(
    memory: object, write: Callable[[Any], str], read: Callable[[object], object]
) -> None:
    assert read(write(memory)) == memory


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("wrong", [5, None, [], {}, "2026-13-40T00:00:00Z"])
def test_both_memories_forget_a_time_of_a_wrong_type(
    read: Callable[[object], object], wrong: object
) -> None:
    good = {"failures": 1, "lastFailure": wrong, "at": wrong, "rate": 0, "boots": [], "buffer": 0}
    assert read(json.dumps(good)) is None


@given(st.one_of(st.text(), json_values.map(json.dumps)))
def test_both_memories_never_raise_on_any_value(value: str) -> None:
    for read in READERS:
        read(value)


def _fields(memory: str) -> st.SearchStrategy[dict[str, Any]]:
    """A written memory with some of its fields replaced by any JSON value."""
    written = json.loads(memory)
    return st.dictionaries(st.sampled_from(sorted(written)), json_values).map(
        lambda changed: {**written, **changed}
    )


@given(_fields(encode(BACKOFF)), _fields(encode_demand(DEMAND)))
def test_a_memory_with_any_fields_changed_is_read_or_forgotten(
    backoff: dict[str, Any], demand: dict[str, Any]
) -> None:
    assert isinstance(decode(json.dumps(backoff)), Backoff | None)
    assert isinstance(decode_demand(json.dumps(demand)), DemandMemory | None)
