"""Read every schema document, whatever its layout, into one list of kinds.

The layout is recognised from the text itself, so adding a document is dropping a file
into `schemas/`; a file in no known layout is an error that names it.
"""

from __future__ import annotations

from pathlib import Path

from codegen import layout_backquoted, layout_bullets, layout_plain, layout_prose
from codegen.fieldtree import ParseResult, SchemaDocError

__all__ = ["parse_document", "read_sources"]


def parse_document(text: str, where: str) -> ParseResult:
    """Parse one document in any known layout."""
    if layout_prose.looks_like(text):
        return layout_prose.parse(text, where)
    if layout_bullets.looks_like(text):
        return layout_bullets.parse(text, where)
    if layout_backquoted.looks_like(text):
        return ParseResult(kinds=[layout_backquoted.parse(text, where)])
    if layout_plain.looks_like(text):
        return ParseResult(kinds=[layout_plain.parse(text, where)])
    raise SchemaDocError(
        where,
        1,
        "expected a known layout: a Field/Type/Description table, a bullet tree with "
        "'Scope:' lines, or a '#Kind [plural.group/version]' header",
    )


def read_sources(schemas: Path, root: Path) -> ParseResult:
    """Every `*.txt` under `schemas`, in name order; `where` is relative to `root`."""
    merged = ParseResult()
    for path in sorted(schemas.glob("*.txt")):
        where = path.relative_to(root).as_posix()
        result = parse_document(path.read_text(encoding="utf-8"), where)
        merged.kinds.extend(result.kinds)
        merged.notices.extend(result.notices)
    return merged
