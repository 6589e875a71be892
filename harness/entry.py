"""One way to run a harness job as `python -m harness.JOB`: each job module exposes
`configure(parser)` and `run(args) -> int`, as the product's subcommands do."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

__all__ = ["run_job"]


def run_job(
    prog: str,
    description: str,
    configure: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse `argv` (the process's arguments when None) and run the job; its exit code."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    configure(parser)
    return run(parser.parse_args(argv))
