"""Layout 1: tables with backquoted paths and `\\|`-separated backquoted enums.

    `spec.bindingMode`<TAB>`Immediate` \\| `WaitForFirstConsumer`<TAB>... (default: `Immediate`)

Used by `virtualtargetclass.txt` and `exporterset.txt`.
"""

from __future__ import annotations

import re

from codegen.fieldtree import KindDoc
from codegen.tables import CellStyle, parse_table_document

__all__ = ["looks_like", "parse"]

_PATH = re.compile(r"`([A-Za-z_][\w.\[\]]*)`")
_ENUM_VALUE = re.compile(r"`([^`]*)`")


def _path(cell: str) -> str | None:
    found = _PATH.fullmatch(cell.strip())
    return found.group(1) if found else None


def _enum(cell: str) -> tuple[str, ...] | None:
    parts = [part.strip() for part in cell.split(r"\|")]
    if len(parts) < 2:
        return None
    values = [_ENUM_VALUE.fullmatch(part) for part in parts]
    return tuple(v.group(1) for v in values if v) if all(values) else None


STYLE = CellStyle(path=_path, enum=_enum, default=re.compile(r"\s*\(default: `([^`]*)`\)\s*$"))


def looks_like(text: str) -> bool:
    """A table whose rows start with a backquoted path."""
    return "\n`spec." in text or "\n`status." in text


def parse(text: str, where: str) -> KindDoc:
    return parse_table_document(text, where, STYLE)
