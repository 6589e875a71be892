"""The fault tests' bounded poll (`tests.chaos.support.until`): a probe's failed assert
is "not yet" while the poll lasts, and its message is what the timeout shows."""

from __future__ import annotations

import pytest

from tests.chaos.support import until


def test_a_probe_that_holds_at_once_returns() -> None:
    assert until("at once", lambda: True, 0.01) >= 0


def test_a_probe_s_failed_assert_is_what_the_timeout_shows() -> None:
    calls: list[int] = []

    def probe() -> bool:
        calls.append(1)
        assert len(calls) < 0, f"look {len(calls)}: not so"
        return True

    with pytest.raises(AssertionError, match=r"^a check: not within 0s: look \d+: not so") as e:
        until("a check", probe, 0.01)
    assert isinstance(e.value.__cause__, AssertionError)
    assert str(e.value.__cause__).startswith(f"look {len(calls)}: not so")  # the last one


def test_an_assert_that_holds_on_a_later_look_is_not_yet() -> None:
    looks: list[int] = []

    def probe() -> bool:
        looks.append(1)
        assert len(looks) > 1, "not on the first look"
        return True

    until("the second look", probe, 5)
    assert len(looks) == 2


def test_other_errors_are_not_yet_and_named_at_the_timeout() -> None:
    def probe() -> bool:
        raise ConnectionRefusedError("the apiserver is down")

    with pytest.raises(AssertionError, match="the apiserver is down") as e:
        until("the apiserver", probe, 0.01)
    assert e.value.__cause__ is None
