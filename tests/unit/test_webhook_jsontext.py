"""compact_json writes what json.dumps writes with compact separators and UTF-8 kept."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.jsontext import compact_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_same_text_as_json_dumps(value: Any) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_values_json_cannot_spell_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="date is not JSON serializable"):
        compact_json({"when": datetime.date(2026, 11, 29)})
