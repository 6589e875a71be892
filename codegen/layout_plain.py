"""Layout 2: plain tab-separated tables with bare paths and `A | B` enums.

    spec.enabled<TAB>boolean<TAB>... (default: True)

Used by `exporter.txt`.
"""

from __future__ import annotations

import re

from codegen.fieldtree import KindDoc
from codegen.tables import HEADER, CellStyle, parse_table_document

__all__ = ["looks_like", "parse"]

_PATH = re.compile(r"[A-Za-z_][\w.\[\]]*")
_ENUM_VALUE = re.compile(r"[A-Za-z0-9_.-]+")


def _path(cell: str) -> str | None:
    return cell.strip() if _PATH.fullmatch(cell.strip()) else None


def _enum(cell: str) -> tuple[str, ...] | None:
    parts = [part.strip() for part in cell.split("|")]
    if len(parts) < 2 or not all(_ENUM_VALUE.fullmatch(part) for part in parts):
        return None
    return tuple(parts)


# `(default: True)`, `(default: 4)`, and the empty string written as two backquotes.
STYLE = CellStyle(
    path=_path, enum=_enum, default=re.compile(r"\s*\(default: (?:``|([^)`]*))\)\s*$")
)


def looks_like(text: str) -> bool:
    """A tab-separated table whose rows start with a bare path."""
    return HEADER in text and ("\nspec." in text or "\nstatus." in text)


def parse(text: str, where: str) -> KindDoc:
    return parse_table_document(text, where, STYLE)
