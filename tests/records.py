"""What the tests measured, kept for the summary at the end of the run.

Under `make test` the tests run in parallel workers (pytest-xdist), and the summary is
printed by the controlling process, which ran none of them: each record is one JSON line
appended to the file the controller names in `VT_TEST_RECORDS` (one short write with
O_APPEND, so lines of several workers never mix). A run without workers uses the same
file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["ENV", "read", "record", "start"]

ENV = "VT_TEST_RECORDS"


def start() -> Path:
    """Name a fresh file for this run (the controller calls it before workers start)."""
    fd, path = tempfile.mkstemp(prefix="vt-test-records-", suffix=".jsonl")
    os.close(fd)
    os.environ[ENV] = path
    return Path(path)


def record(kind: str, **data: Any) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = (json.dumps({"kind": kind, **data}) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read(kind: str) -> list[dict[str, Any]]:
    path = os.environ.get(ENV)
    if not path or not Path(path).exists():
        return []
    found = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    return [entry for entry in found if entry.get("kind") == kind]
