"""What the two tabular layouts share: the page frame and the conversion of one row.

Both `virtualtargetclass.txt` (backquoted cells) and `exporter.txt` (plain cells) are a
kind name, an `group/version` line, a description, then `Spec` / `Status` sections of
`Field<TAB>Type<TAB>Description` rows. They differ only in how a cell is written, which
each layout module supplies as a `CellStyle`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codegen.fieldtree import SCALAR_TYPES, Field, KindDoc, SchemaDocError

__all__ = ["HEADER", "CellStyle", "parse_table_document", "typed_default"]

HEADER = "Field\tType\tDescription"
_GROUP_VERSION = re.compile(r"^([a-z0-9.-]+)/(v[0-9a-z]+)$")
_SECTIONS = ("Spec", "Status")
_KNOWN_TYPES = (*SCALAR_TYPES, "object", "array")


@dataclass(frozen=True)
class CellStyle:
    """How one tabular layout writes a path, an enum list and a default."""

    path: Callable[[str], str | None]
    enum: Callable[[str], tuple[str, ...] | None]
    default: re.Pattern[str]


def typed_default(raw: str, type_: str, where: str, line: int) -> Any:
    """Read a documented default as a value of the field's type."""
    if type_ == "integer":
        if not re.fullmatch(r"-?[0-9]+", raw):
            raise SchemaDocError(where, line, f"expected an integer default, found {raw!r}")
        return int(raw)
    if type_ == "boolean":
        if raw.lower() not in ("true", "false"):
            raise SchemaDocError(where, line, f"expected a boolean default, found {raw!r}")
        return raw.lower() == "true"
    return raw


def _row(cells: list[str], style: CellStyle, where: str, line: int) -> Field:
    path = style.path(cells[0])
    if path is None:
        raise SchemaDocError(where, line, f"expected a field path, found {cells[0]!r}")
    enum = style.enum(cells[1])
    type_ = "string" if enum else cells[1].strip()
    if type_ not in _KNOWN_TYPES:
        known = ", ".join(_KNOWN_TYPES)
        raise SchemaDocError(where, line, f"expected a type ({known}) or enum, found {cells[1]!r}")
    description, default, has_default = cells[2].strip(), None, False
    found = style.default.search(description)
    if found:
        description = description[: found.start()].rstrip()
        default, has_default = typed_default(found.group(1) or "", type_, where, line), True
    return Field(
        path=path,
        type=type_,
        line=line,
        description=description,
        enum=enum or (),
        default=default,
        has_default=has_default,
    )


def parse_table_document(text: str, where: str, style: CellStyle) -> KindDoc:
    """Parse one tabular document into a `KindDoc`."""
    lines = text.splitlines()
    numbered = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
    if not numbered:
        raise SchemaDocError(where, 1, "expected a kind name on the first line, found nothing")
    doc = KindDoc(kind=numbered[0][1].rstrip("¶").strip(), file=where)
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", doc.kind):
        raise SchemaDocError(where, numbered[0][0], f"expected a kind name, found {doc.kind!r}")
    in_table = False
    for n, stripped in numbered[1:]:
        raw = lines[n - 1]
        gv = _GROUP_VERSION.match(stripped)
        if gv and not doc.group:
            doc.group, doc.version = gv.groups()
        elif stripped.rstrip("¶").strip() in _SECTIONS:
            in_table = False
        elif raw.rstrip("\r") == HEADER:
            in_table = True
        elif in_table:
            cells = raw.rstrip("\r").split("\t")
            if len(cells) != 3:
                raise SchemaDocError(
                    where, n, f"expected 3 tab-separated cells ({HEADER!r}), found {len(cells)}"
                )
            doc.fields.append(_row(cells, style, where, n))
        elif not doc.description:
            doc.description = stripped
        else:
            raise SchemaDocError(
                where,
                n,
                f"expected a section (Spec, Status) or a table header, found {stripped[:40]!r}",
            )
    if not doc.group:
        line = numbered[1][0] if len(numbered) > 1 else numbered[0][0]
        raise SchemaDocError(
            where, line, "expected a group/version line such as example.dev/v1alpha1"
        )
    return doc
