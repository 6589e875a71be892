"""Read every schema document, whatever its layout, into one list of kinds.

The layout is recognised from the text itself, so adding a document is dropping a file
into `schemas/`; a file in no known layout is an error that names it. A page of
descriptions without field names becomes a kind when the overlay names its reference
schema (`codegen.described`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from codegen import layout_backquoted, layout_bullets, layout_plain, layout_prose
from codegen.described import read_described
from codegen.fieldtree import KindDoc, ParseResult, SchemaDocError
from codegen.overlay import FileOverlay, OverlayError

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


def _described(path: Path, where: str, text: str, overlay: FileOverlay, root: Path) -> KindDoc:
    if not overlay.reference or not layout_prose.looks_like(text):
        raise OverlayError(
            f"schemas/overlay.yaml: files.{path.name}: a reference schema (with its abridged "
            "fields) is for a '#Kind [plural.group/version]' page of descriptions only"
        )
    reference = path.parent / overlay.reference
    return read_described(
        text,
        where,
        reference.read_text(encoding="utf-8"),
        reference.relative_to(root).as_posix(),
        overlay.abridged,
    )


def read_sources(
    schemas: Path, root: Path, files: Mapping[str, FileOverlay] | None = None
) -> ParseResult:
    """Every `*.txt` under `schemas`, in name order; `where` is relative to `root`.
    `files` is the overlay's per-document part (reference schemas of prose pages)."""
    merged = ParseResult()
    for path in sorted(schemas.glob("*.txt")):
        where = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        overlay = (files or {}).get(path.name, FileOverlay())
        if overlay.reference or overlay.abridged:
            merged.kinds.append(_described(path, where, text, overlay, root))
            continue
        result = parse_document(text, where)
        merged.kinds.extend(result.kinds)
        merged.notices.extend(result.notices)
    return merged
