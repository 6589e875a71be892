"""Generate `requirements.lock`: every package the image installs, pinned with hashes.

The runtime dependencies of `pyproject.toml` and its build requirements (setuptools,
which builds the wheel inside the image and is removed again) are resolved by uv
(`uv pip compile --generate-hashes`) for CPython 3.11 on every platform, so two builds
of one commit install the same files. The Dockerfile and the wheel test install with
`pip install --require-hashes -r requirements.lock`.

    python -m harness.lock           # rewrite requirements.lock (`make lock`)
    python -m harness.lock --check   # exit 1 if it is stale against pyproject.toml

Both resolve against the package index. The committed lock is handed to uv as the
preferred versions, so a current lock comes back byte for byte and a refresh moves only
what `pyproject.toml` forces; `make lock` after deleting the file takes the newest.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path

from harness.deploy_render import REPO

__all__ = ["LOCK", "PYTHON_VERSION", "compile_lock", "main", "stale"]

LOCK = REPO / "requirements.lock"
# The Python of both bases (python:3.11-slim-bookworm, Debian bookworm's python3).
PYTHON_VERSION = "3.11"


def _uv() -> str:
    """uv, from the dev extra (its Python package ships the binary)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise SystemExit("lock: uv is not installed; run `make venv`") from None
        return found
    return str(find_uv_bin())


def compile_lock(pyproject: Path, output: Path) -> None:
    """Resolve `pyproject`'s dependencies and build requirements into `output`; an
    existing `output` gives the preferred versions."""
    build = tomllib.loads(pyproject.read_text())["build-system"]["requires"]
    command = [
        _uv(),
        "pip",
        "compile",
        pyproject.name,
        "-",  # the build requirements, from stdin: pyproject.toml stays their one source
        "--generate-hashes",
        "--universal",
        "--python-version",
        PYTHON_VERSION,
        "--custom-compile-command",
        "make lock",
        "--quiet",
        "--output-file",
        str(output.resolve()),
    ]
    result = subprocess.run(
        command,
        input="".join(f"{r}\n" for r in build),
        cwd=pyproject.parent,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"lock: uv pip compile failed:\n{result.stderr.strip()}")


def stale(pyproject: Path, lock: Path) -> list[str]:
    """The diff between `lock` and what `make lock` would write now (empty: current)."""
    with tempfile.TemporaryDirectory(prefix="lock-") as tmp:
        fresh = Path(tmp) / lock.name
        if lock.is_file():
            shutil.copyfile(lock, fresh)
        compile_lock(pyproject, fresh)
        old = lock.read_text().splitlines() if lock.is_file() else []
        new = fresh.read_text().splitlines()
    return list(difflib.unified_diff(old, new, str(lock.name), "make lock", lineterm="", n=0))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.lock", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report a stale lock")
    args = parser.parse_args(argv)
    pyproject = REPO / "pyproject.toml"
    if args.check:
        diff = stale(pyproject, LOCK)
        if diff:
            print("\n".join(diff[:40]), file=sys.stderr)
            print(
                f"lock: {LOCK.name} is stale against pyproject.toml; run `make lock`",
                file=sys.stderr,
            )
            return 1
        return 0
    compile_lock(pyproject, LOCK)
    print(f"lock: wrote {LOCK.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
