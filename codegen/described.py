"""The fourth kind of source: a description-only page paired with a reference schema.

The reference (`codegen.reference`) gives names, types and structure; the page gives
every description, placed by `codegen.alignment`. The page is the hand-maintained text,
so its wording, not the reference's, is what the schema, models and docs carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from codegen.alignment import Placement, align
from codegen.fieldtree import Coverage, Field, KindDoc
from codegen.jsonschema import node_at
from codegen.layout_prose import read_page
from codegen.overlay import OverlayError
from codegen.reference import ReferenceField, read_reference

__all__ = ["read_described"]

# A CRD may give the root's `metadata` only a type: its paragraph is placed, not carried.
_TYPE_ONLY = "metadata"


def _check_abridged(
    abridged: Sequence[str],
    placements: list[Placement],
    fields: list[ReferenceField],
    page: str,
) -> None:
    """Every overlay entry must still be needed, so a fixed page cannot leave one behind."""
    placed = {fields[p.field].path: p.abridged for p in placements}
    where = f"schemas/overlay.yaml: files.{PurePosixPath(page).name}.abridged"
    for path in abridged:
        if path not in placed:
            raise OverlayError(f"{where}: {path}: no paragraph of {page} describes it")
        if not placed[path]:
            raise OverlayError(f"{where}: {path}: the page gives its whole text; drop the entry")


def read_described(
    page_text: str,
    page_where: str,
    reference_text: str,
    reference_where: str,
    abridged: Sequence[str] = (),
) -> KindDoc:
    """The kind the page describes, with the reference's schema and the page's words."""
    page = read_page(page_text, page_where)
    tree = read_reference(reference_text, reference_where, page.kind)
    placements = align(
        page.paragraphs,
        [f.text for f in tree.fields],
        [f.path for f in tree.fields],
        page_where,
        frozenset(abridged),
    )
    _check_abridged(abridged, placements, tree.fields, page_where)
    doc = KindDoc(
        kind=page.kind, file=page_where, group=page.group, version=page.version, schema=tree.schema
    )
    for placement in placements:
        reference = tree.fields[placement.field]
        paragraphs = page.paragraphs[placement.first : placement.last + 1]
        description = "\n\n".join(p.text for p in paragraphs)
        if reference.path == _TYPE_ONLY:
            continue
        node = node_at(tree.schema, reference.path)
        if node is None:  # the reference walk lists only fields it built a node for
            raise AssertionError(f"{reference_where}: no schema node for {reference.path}")
        node["description"] = description
        doc.fields.append(
            Field(
                path=reference.path,
                type=reference.type,
                line=paragraphs[0].line,
                description=description,
                enum=tuple(node.get("enum", ())),
            )
        )
    described = {tree.fields[p.field].path for p in placements}
    doc.coverage = Coverage(
        page=page_where,
        reference=reference_where,
        paragraphs=len(page.paragraphs),
        described=len(described),
        undescribed=tuple((f.path, f.type) for f in tree.fields if f.path not in described),
        abridged=tuple(abridged),
        cuts=tuple(tree.cuts),
    )
    return doc
