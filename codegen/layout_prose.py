"""Layout 4: descriptions without field names (`kubevirt-virtualmachineinstance.txt`).

    #VirtualMachineInstance [virtualmachineinstances.kubevirt.io/v1]
    <one paragraph per field, in the reference's order, but no field names>

Field names cannot be recovered from prose alone, and guessing them would invent an API.
Paired with a reference schema (`schemas/overlay.yaml`: `files.<page>.reference`), the
page is read by `codegen.described`; alone, it yields only a notice saying what it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codegen.fieldtree import ParseResult, SchemaDocError

__all__ = ["Page", "Paragraph", "looks_like", "parse", "read_page"]

_HEADER = re.compile(r"^#([A-Z][A-Za-z0-9]*) \[([a-z0-9]+)\.([a-z0-9.-]+)/(v[0-9a-z]+)\]\s*$")


@dataclass(frozen=True)
class Paragraph:
    """A block of lines between blank lines; a list item is a line of its own."""

    line: int
    text: str


@dataclass(frozen=True)
class Page:
    kind: str
    plural: str
    group: str
    version: str
    paragraphs: tuple[Paragraph, ...]


def looks_like(text: str) -> bool:
    return text.startswith("#") and bool(_HEADER.match(text.splitlines()[0]))


def read_page(text: str, where: str) -> Page:
    lines = text.splitlines()
    header = _HEADER.match(lines[0]) if lines else None
    if header is None:
        raise SchemaDocError(where, 1, "expected a header such as '#Kind [plural.group/version]'")
    paragraphs: list[Paragraph] = []
    block: list[str] = []
    for number, line in enumerate([*lines[1:], ""], 2):
        if line.strip():
            block.append(line.strip())
        elif block:
            paragraphs.append(Paragraph(number - len(block), "\n".join(block)))
            block = []
    kind, plural, group, version = header.groups()
    return Page(kind, plural, group, version, tuple(paragraphs))


def parse(text: str, where: str) -> ParseResult:
    """A page without a reference schema: a notice only."""
    page = read_page(text, where)
    return ParseResult(
        notices=[
            f"{where}:1: {page.kind} ({page.group}/{page.version}) has "
            f"{len(page.paragraphs)} descriptions without field names and no reference "
            "schema (overlay.yaml: files.<page>.reference); no model or CRD generated"
        ]
    )
