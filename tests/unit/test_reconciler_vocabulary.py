"""Jumpstarter's vocabulary: the labels and annotation keys its exporter-set controller
uses, and every condition and Event reason documented in docs/conditions.md."""

from __future__ import annotations

from pathlib import Path

from pool.model import reasons
from pool.model.adapt import pool_view
from pool.model.keys import LEGACY_SURPLUS_SINCE, NAME_LABEL, SURPLUS_SINCE
from pool.model.timefmt import parse_time

CONDITIONS = Path(__file__).resolve().parents[2] / "docs" / "conditions.md"


def test_keys_are_jumpstarters() -> None:
    assert NAME_LABEL == "exporterset.jumpstarter.dev/name"
    assert SURPLUS_SINCE == "exporterset.jumpstarter.dev/surplus-since"


def test_the_cooldown_is_read_from_jumpstarters_key_and_from_the_one_earlier_versions_wrote() -> (
    None
):
    def since(annotations: dict[str, str]) -> object:
        return pool_view({"metadata": {"name": "p", "annotations": annotations}})[0].surplus_since

    assert since({SURPLUS_SINCE: "2026-01-01T00:00:00Z"}) == parse_time("2026-01-01T00:00:00Z")
    assert since({LEGACY_SURPLUS_SINCE: "2026-01-02T00:00:00Z"}) == parse_time(
        "2026-01-02T00:00:00Z"
    )
    both = {SURPLUS_SINCE: "2026-01-01T00:00:00Z", LEGACY_SURPLUS_SINCE: "2026-01-02T00:00:00Z"}
    assert since(both) == parse_time("2026-01-01T00:00:00Z")


def test_every_reason_is_in_the_conditions_page() -> None:
    text = CONDITIONS.read_text()
    names = [v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)]
    assert len(names) > 20
    for name in names:
        assert f"`{name}`" in text, f"reason {name} is not in docs/conditions.md"
