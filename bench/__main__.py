"""`python -m bench [name [args ...] ...]`: run every benchmark module (or the named ones,
each with the arguments that follow its name, e.g. `python -m bench scale 1000`), print
results."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench


def main(argv: list[str]) -> int:
    modules = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")
    )
    runs: list[tuple[str, list[str]]] = []
    for arg in argv:
        if arg in modules or not runs:
            runs.append((arg, []))
        else:
            runs[-1][1].append(arg)
    for name, args in runs or [(name, []) for name in modules]:
        module = importlib.import_module(f"bench.{name}")
        print(module.main(args) if args else module.main())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
