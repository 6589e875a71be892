"""Write generated files only when their bytes change, or report which would change.

Writing nothing when nothing changed keeps `make crds` idempotent (no touched mtimes,
no diff), and the same comparison is CI's check that committed output is current.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["stale_files", "write_files"]


def stale_files(root: Path, files: dict[str, str]) -> list[str]:
    """Relative paths whose committed text differs from `files` (missing counts)."""
    stale = []
    for rel, text in sorted(files.items()):
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    return stale


def write_files(root: Path, files: dict[str, str]) -> list[str]:
    """Write what changed; returns the relative paths written."""
    written = stale_files(root, files)
    for rel in written:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel], encoding="utf-8")
    return written
