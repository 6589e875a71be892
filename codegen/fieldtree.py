"""The field tree: what every document layout is parsed into.

Each parser reads one layout of API reference text and yields `KindDoc`s made of flat
`Field`s. Everything downstream (JSON Schema, models, CRDs, docs, the round-trip test)
reads only this shape, so a fourth layout costs one parser and nothing else.

Paths use one notation whatever the source wrote: dotted names from the object root,
with `[]` after a list (`spec.scheduling.tolerations[].key`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCALAR_TYPES", "Coverage", "Field", "KindDoc", "ParseResult", "SchemaDocError"]

# The JSON Schema types a document may name for a field.
SCALAR_TYPES = ("string", "integer", "number", "boolean")


class SchemaDocError(Exception):
    """A malformed document: names the file, the line and what was expected."""

    def __init__(self, file: str, line: int, expected: str) -> None:
        super().__init__(f"{file}:{line}: {expected}")
        self.file = file
        self.line = line
        self.expected = expected


@dataclass(frozen=True)
class Field:
    """One documented field. `type` is a JSON Schema type; `items` the item type of arrays."""

    path: str
    type: str
    line: int
    description: str = ""
    enum: tuple[str, ...] = ()
    default: Any = None
    has_default: bool = False
    required: bool = False
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    minimum: int | None = None
    items: str | None = None
    examples: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The last path segment (`key` for `spec.tolerations[].key`)."""
        return self.path.rsplit(".", 1)[-1].removesuffix("[]")


@dataclass(frozen=True)
class Coverage:
    """How much of a reference schema a description-only page describes."""

    page: str  # the page of descriptions
    reference: str  # the reference schema file
    paragraphs: int  # all of the page's paragraphs: each is placed, or the build stops
    described: int  # reference fields with a description from the page
    undescribed: tuple[tuple[str, str], ...]  # (path, type) of the others, in page order
    abridged: tuple[str, ...] = ()  # fields whose page text is the reference's first sentences
    cuts: tuple[str, ...] = ()  # where a recursive definition was cut

    @property
    def fields(self) -> int:
        return self.described + len(self.undescribed)


@dataclass
class KindDoc:
    """One kind as a document describes it, built from `fields`. A kind read against a
    reference schema brings that schema instead (titled, with the page's descriptions)
    and its coverage; its `fields` are then the described ones."""

    kind: str
    file: str
    group: str = ""
    version: str = ""
    scope: str = ""
    description: str = ""
    fields: list[Field] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    schema: dict[str, Any] | None = None
    coverage: Coverage | None = None


@dataclass
class ParseResult:
    """The kinds a document describes, and what it could not describe (one line each)."""

    kinds: list[KindDoc] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
