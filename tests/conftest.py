"""Test-wide settings.

Under CI (CI=true) hypothesis runs derandomized: a landing is judged on reproducible
examples, while every local run still explores new ones (and a failure found there is
kept as an explicit `@example`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")


# Wall time per part of the suite (setup, call and teardown of its tests: a cluster or an
# image built by a fixture counts for the part whose test asked for it), printed at the
# end so a CI log says how long each part took.
_PART_SECONDS: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    part = Path(report.fspath).parts
    tests = part.index("tests") if "tests" in part else -1
    _PART_SECONDS[part[tests + 1] if 0 <= tests < len(part) - 2 else "other"] += report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _PART_SECONDS:
        return
    terminalreporter.section("time per part (tests/<part>, setup and teardown included)")
    for part, seconds in sorted(_PART_SECONDS.items()):
        terminalreporter.write_line(f"{part:<8} {seconds:7.1f} s")
