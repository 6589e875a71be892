"""Place every paragraph of a description-only page on the reference field it describes.

Texts are compared after undoing what the page's renderer changed: whitespace runs,
`<placeholders>` (dropped as if they were HTML tags), backquotes (single quotes on the
page), `*emphasis*`, list items (`- item` in the reference, a `• item` line on the page),
and the `Possible enum values:` appendix that openapi-gen adds to reference descriptions.
A description the page splits over several paragraphs is matched by their joined text.

The page lists fields in the reference's order (`codegen.reference`), so a placement
is a strictly increasing sequence of fields. Where several fields share a text ("Name
of the referent."), the order decides; where it cannot, the build stops and names the
paragraph rather than guess. A paragraph that fits no field stops the build too, with
its line and the nearest candidates.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from codegen.fieldtree import SchemaDocError
from codegen.layout_prose import Paragraph

__all__ = ["Placement", "align"]

_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]*>")
_EMPHASIS = re.compile(r"\*(\w[^*\n]*?)\*")
_ENUM_APPENDIX = re.compile(r"\n\nPossible enum values:\n.*", re.DOTALL)
_BULLET = "• "
_EXCERPT = 60


@dataclass(frozen=True)
class Placement:
    """Paragraphs `first`..`last` (indexes, inclusive) describe field `field`. `abridged`:
    they give only the first sentences of the reference's text."""

    field: int
    first: int
    last: int
    abridged: bool = False


def _comparable(text: str) -> str:
    text = _PLACEHOLDER.sub("", text).replace("`", "'")
    return " ".join(_EMPHASIS.sub(r"\1", text).split())


def _reference_form(text: str) -> str:
    return _comparable(_ENUM_APPENDIX.sub("", text))


def _page_form(paragraph: Paragraph) -> str:
    lines = paragraph.text.split("\n")
    return _comparable(
        " ".join("- " + ln.removeprefix(_BULLET) if ln.startswith(_BULLET) else ln for ln in lines)
    )


def _excerpt(paragraph: Paragraph) -> str:
    text = " ".join(paragraph.text.split())
    return repr(text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…")


class _Candidates:
    """Which fields a run of paragraphs starting at one index can describe."""

    def __init__(self, forms: Sequence[str], abridged: Sequence[int]) -> None:
        self.exact: dict[str, list[int]] = {}
        for index, form in enumerate(forms):
            if form:
                self.exact.setdefault(form, []).append(index)
        self.sorted = sorted(form for form in forms if form)
        self.forms = forms
        self.abridged = abridged

    def continues(self, text: str) -> bool:
        """Some field's text goes on after `text` (so the next paragraph may belong to it)."""
        at = bisect.bisect_left(self.sorted, text + " ")
        return at < len(self.sorted) and self.sorted[at].startswith(text + " ")

    def at(self, start: int, pages: Sequence[str]) -> list[Placement]:
        found: list[Placement] = []
        text, last = pages[start], start
        while True:
            found += [Placement(j, start, last) for j in self.exact.get(text, ())]
            if text.endswith("."):
                found += [
                    Placement(j, start, last, abridged=True)
                    for j in self.abridged
                    if self.forms[j].startswith(text + " ")
                ]
            if last + 1 == len(pages) or not self.continues(text):
                return found
            last += 1
            text = f"{text} {pages[last]}"


def _nearest(form: str, forms: Sequence[str], paths: Sequence[str], after: int) -> str:
    """The three fields after `after` whose text is most like `form` (word by word, whole
    or as a first paragraph), and any earlier field with the very same text."""
    words = form.split()
    scored = []
    for j in range(after + 1, len(forms)):
        other = forms[j].split()
        if other:
            alike = max(
                difflib.SequenceMatcher(None, words, text, autojunk=False).ratio()
                for text in (other, other[: len(words)])
            )
            scored.append((-round(alike, 2), j))
    listed = [f"{paths[j]} ({-score:.0%} alike)" for score, j in sorted(scored)[:3]]
    nearest = ", ".join(listed) or "no field is left"
    earlier = [paths[j] for j in range(after + 1) if forms[j] == form]
    if earlier:
        nearest += f"; {', '.join(earlier)} has this text but comes earlier"
    return nearest


def align(
    paragraphs: Sequence[Paragraph],
    texts: Sequence[str],
    paths: Sequence[str],
    where: str,
    abridged: frozenset[str] = frozenset(),
) -> list[Placement]:
    """One placement per description, covering every paragraph in order, or an error."""
    forms = [_reference_form(text) for text in texts]
    pages = [_page_form(p) for p in paragraphs]
    candidates = _Candidates(forms, [j for j, path in enumerate(paths) if path in abridged])
    starts = [candidates.at(i, pages) for i in range(len(pages))]
    _check_placeable(starts, paragraphs, pages, forms, paths, where)
    # best_after[i]: the highest first field of any placement of paragraphs i.. (len: none left).
    best_after: list[int | None] = [None] * len(pages) + [len(forms)]
    for i in range(len(pages) - 1, -1, -1):
        firsts = [c.field for c in starts[i] if _below(c.field, best_after[c.last + 1])]
        best_after[i] = max(firsts, default=None)
    placements: list[Placement] = []
    i, previous = 0, -1
    while i < len(pages):
        fits = [
            c for c in starts[i] if c.field > previous and _below(c.field, best_after[c.last + 1])
        ]
        if len(fits) > 1:
            raise _ambiguous(fits, paragraphs, paths, where)
        (chosen,) = fits  # one at least: _check_placeable found a complete placement
        placements.append(chosen)
        i, previous = chosen.last + 1, chosen.field
    return placements


def _below(field: int, bound: int | None) -> bool:
    return bound is not None and field < bound


def _ambiguous(
    fits: list[Placement], paragraphs: Sequence[Paragraph], paths: Sequence[str], where: str
) -> SchemaDocError:
    spans = len({c.last for c in fits}) > 1
    options = " and ".join(
        f"{paths[c.field]} (lines {paragraphs[c.first].line}-{paragraphs[c.last].line})"
        if spans
        else paths[c.field]
        for c in fits
    )
    first = paragraphs[fits[0].first]
    return SchemaDocError(
        where,
        first.line,
        f"expected one field for the paragraph {_excerpt(first)}; it fits {options}, "
        "and the page's order does not settle which",
    )


def _check_placeable(
    starts: list[list[Placement]],
    paragraphs: Sequence[Paragraph],
    pages: Sequence[str],
    forms: Sequence[str],
    paths: Sequence[str],
    where: str,
) -> None:
    """Fail at the furthest paragraph any in-order placement of those before it reaches."""
    # lowest[i]: the lowest field the paragraphs before i can end on (-1: none before).
    lowest: list[int | None] = [-1] + [None] * len(pages)
    for i in range(len(pages)):
        before = lowest[i]
        if before is None:
            continue
        for c in starts[i]:
            if c.field > before:
                known = lowest[c.last + 1]
                lowest[c.last + 1] = c.field if known is None else min(known, c.field)
    if lowest[-1] is not None:
        return
    stuck = max(i for i, known in enumerate(lowest[:-1]) if known is not None)
    last = lowest[stuck]
    assert last is not None  # `stuck` was reached
    after = f" after {paths[last]}" if last >= 0 else ""
    raise SchemaDocError(
        where,
        paragraphs[stuck].line,
        f"expected a reference field that the paragraph {_excerpt(paragraphs[stuck])} "
        f"describes, in the page's order{after}; found none (nearest: "
        f"{_nearest(pages[stuck], forms, paths, last)})",
    )
