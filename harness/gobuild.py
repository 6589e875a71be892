"""How every Go program of the harness is compiled and linked: the control plane (the
Makefile's `control-plane`), Jumpstarter's controllers and operators
(`harness.jumpstarter_build`) and KubeVirt (`harness.kubevirt_build`, `harness.kubevirt_crds`).

No debug information: the compiler makes no DWARF (`-gcflags=all=-dwarf=false`) and the
linker leaves out the symbol table and DWARF (`-s -w`, as Kubernetes' release build does:
kubernetes#108371). Nothing here runs these programs under a debugger, and a panic's stack
trace keeps its files and lines (from the pcln table, not DWARF). What it saves is CPU, and
a fresh clone's set-up is as long as its CPU on these machines (docs/measurements.md). One
set of flags for all: builds of the same module version share compiled packages in the Go
build cache only when their flags are the same.

Stdlib only: the Makefile reads it with the system's Python before the venv exists.

    python3 -m harness.gobuild gcflags    # the value of -gcflags
    python3 -m harness.gobuild ldflags    # what every -ldflags starts with
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["GCFLAGS", "LDFLAGS", "build_flags", "goflags", "ldflags"]

GCFLAGS = "all=-dwarf=false"
LDFLAGS = "-s -w"


def ldflags(*more: str) -> str:
    """`-ldflags`' value: no symbol table or DWARF, then `more` (e.g. `-X` stamps)."""
    return " ".join([LDFLAGS, *more])


def build_flags(*more_ldflags: str) -> list[str]:
    """The flags of a `go build` or `go run` (before its packages)."""
    return [f"-gcflags={GCFLAGS}", "-ldflags", ldflags(*more_ldflags)]


def goflags(*more: str) -> str:
    """A `GOFLAGS` value with the compiler's flags (for commands that compile what another
    build also compiles, so that both share the cache), then `more`."""
    return " ".join([f"-gcflags={GCFLAGS}", *more])


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    values = {"gcflags": GCFLAGS, "ldflags": LDFLAGS}
    if len(args) != 1 or args[0] not in values:
        print(f"usage: python3 -m harness.gobuild {{{'|'.join(values)}}}", file=sys.stderr)
        return 2
    print(values[args[0]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
