"""Test-wide settings.

Under CI (CI=true) hypothesis runs derandomized: a landing is judged on reproducible
examples, while every local run still explores new ones (and a failure found there is
kept as an explicit `@example`).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")
