"""`python -m bench [name ...]`: run every benchmark module (or the named ones), print results."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench


def main(argv: list[str]) -> int:
    names = argv or sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")
    )
    for name in names:
        print(importlib.import_module(f"bench.{name}").main())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
