"""Layout 3: the Deckhouse bullet tree, several kinds in one file.

    VirtualDisk                      <- kind, then `Scope:`, `Version:`, `Example:` + YAML
    • spec                           <- a field: a bullet whose depth (indent / 2) equals
                                        its number of dots, then its type on its own line
      object
      • spec.dataSource
        object
        Required value               <- then attributes, one paragraph each:
        Pattern: ^...$                  Pattern, Length a..b, Minimal / Maximum length,
        Allowed values: A, B            Allowed values (an enum, or `0 <= X`), Default,
        Example: + YAML                 Example + YAML; any other text is description

Bullets inside a description (`• HTTP`, `• Ready: ...`) fail the depth test and stay text.
Children of an array of objects are written `parent.child`; they become `parent[].child`.
A kind documented only by examples yields a notice, not invented fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codegen.fieldtree import SCALAR_TYPES, Field, KindDoc, ParseResult, SchemaDocError
from codegen.tables import typed_default

__all__ = ["looks_like", "parse"]

_BULLET = "• "
_FIELD_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_API_VERSION = re.compile(r"^apiVersion: ([a-z0-9.-]+)/(v[0-9a-z]+)\s*$")
_TYPES = {
    **{t: (t, None) for t in (*SCALAR_TYPES, "object", "array")},
    **{f"array of {t}s": ("array", t) for t in (*SCALAR_TYPES, "object")},
    # A Kubernetes quantity such as `10Gi` or `5`.
    "integer or string": ("int-or-string", None),
}
_LENGTH = re.compile(r"Length: ([0-9]+)\.\.([0-9]+)")
_AT_LEAST = re.compile(r"Allowed values: (-?[0-9]+) <= X")


def looks_like(text: str) -> bool:
    return "\nScope: " in text and _BULLET in text


@dataclass
class _Pending:
    """A field while its attribute paragraphs are being read."""

    path: str
    type: str
    items: str | None
    line: int
    indent: int
    text: list[str] = field(default_factory=list)
    attrs: dict[str, object] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_field_bullet(line: str) -> bool:
    stripped = line.strip()
    if not stripped.startswith(_BULLET):
        return False
    name = stripped[len(_BULLET) :]
    return bool(_FIELD_PATH.fullmatch(name)) and _indent(line) == 2 * name.count(".")


def _kind_starts(lines: list[str], n: int) -> bool:
    """A bare capitalised word followed (after blanks) by a `Scope:` line."""
    if not _KIND.fullmatch(lines[n]):
        return False
    following = [line for line in lines[n + 1 : n + 4] if line.strip()]
    return bool(following) and following[0].startswith("Scope: ")


def _attribute(pending: _Pending, text: str, where: str, n: int) -> None:
    attrs = pending.attrs
    if text == "Required value":
        attrs["required"] = True
    elif text.startswith("Pattern: "):
        attrs["pattern"] = text.removeprefix("Pattern: ")
    elif match := _LENGTH.fullmatch(text):
        attrs["min_length"], attrs["max_length"] = int(match.group(1)), int(match.group(2))
    elif text.startswith("Minimal length: "):
        attrs["min_length"] = _int(text.removeprefix("Minimal length: "), where, n)
    elif text.startswith("Maximum length: "):
        attrs["max_length"] = _int(text.removeprefix("Maximum length: "), where, n)
    elif match := _AT_LEAST.fullmatch(text):
        attrs["minimum"] = int(match.group(1))
    elif text.startswith("Allowed values: "):
        attrs["enum"] = tuple(v.strip() for v in text.removeprefix("Allowed values: ").split(","))
    elif text.startswith("Default: "):
        raw = text.removeprefix("Default: ").strip()
        # The empty string, however the document quoted it (typographic quotes included).
        raw = "" if raw in ("\u2018\u2019", "''", '""', "\u201c\u201d") else raw
        attrs["default"] = typed_default(raw, pending.type, where, n)
    else:
        pending.text.append(text)


def _int(raw: str, where: str, n: int) -> int:
    if not raw.strip().isdigit():
        raise SchemaDocError(where, n, f"expected a whole number, found {raw!r}")
    return int(raw)


def _finish(pending: _Pending, arrays: set[str]) -> Field:
    parts = pending.path.split(".")
    # `status.conditions.type` under the array `status.conditions` -> `status.conditions[].type`
    path = parts[0]
    for part in parts[1:]:
        path = f"{path}[].{part}" if path in arrays else f"{path}.{part}"
    attrs = pending.attrs
    return Field(
        path=path,
        type=pending.type,
        line=pending.line,
        description="\n".join(pending.text),
        enum=attrs.get("enum", ()),  # type: ignore[arg-type]
        default=attrs.get("default"),
        has_default="default" in attrs,
        required=bool(attrs.get("required", False)),
        pattern=attrs.get("pattern"),  # type: ignore[arg-type]
        min_length=attrs.get("min_length"),  # type: ignore[arg-type]
        max_length=attrs.get("max_length"),  # type: ignore[arg-type]
        minimum=attrs.get("minimum"),  # type: ignore[arg-type]
        items=pending.items,
        examples=tuple(pending.examples),
    )


def _read_kind(lines: list[str], start: int, end: int, where: str) -> KindDoc:
    doc = KindDoc(kind=lines[start].strip(), file=where)
    arrays: set[str] = set()
    pending: _Pending | None = None
    n = start + 1
    while n < end:
        line, stripped = lines[n], lines[n].strip()
        if _is_field_bullet(line):
            if pending:
                doc.fields.append(_finish(pending, arrays))
            path = stripped[len(_BULLET) :]
            type_line = next((k for k in range(n + 1, end) if lines[k].strip()), end)
            type_text = lines[type_line].strip() if type_line < end else ""
            if type_text not in _TYPES:
                known = ", ".join(_TYPES)
                raise SchemaDocError(
                    where,
                    type_line + 1,
                    f"expected the type of {path} ({known}), found {type_text!r}",
                )
            type_, items = _TYPES[type_text]
            if type_ == "array":
                arrays.add(path)
            pending = _Pending(path, type_, items, n + 1, _indent(line))
            n = type_line + 1
            continue
        if pending is None:
            _kind_header(doc, stripped, lines, n, where)
        elif stripped == "Example:":
            n = _read_example(lines, n + 1, end, pending.examples)
            continue
        elif stripped:
            _attribute(pending, stripped, where, n + 1)
        n += 1
    if pending:
        doc.fields.append(_finish(pending, arrays))
    return doc


def _kind_header(doc: KindDoc, stripped: str, lines: list[str], n: int, where: str) -> None:
    if stripped.startswith("Scope: "):
        doc.scope = stripped.removeprefix("Scope: ")
    elif stripped.startswith("Version: "):
        doc.version = stripped.removeprefix("Version: ")
    elif match := _API_VERSION.match(lines[n]):
        doc.group = doc.group or match.group(1)
        doc.version = doc.version or match.group(2)
    if stripped.startswith("apiVersion: "):
        block: list[str] = []
        for line in lines[n:]:
            if not line.strip() or line.startswith(_BULLET):
                break
            block.append(line)
        doc.examples.append("\n".join(block))


def _read_example(lines: list[str], n: int, end: int, into: list[str]) -> int:
    """Collect an `Example:` block: blank lines, then YAML up to the next blank line."""
    while n < end and not lines[n].strip():
        n += 1
    block: list[str] = []
    while n < end and lines[n].strip():
        block.append(lines[n].strip())
        n += 1
    into.append("\n".join(block))
    return n


def parse(text: str, where: str) -> ParseResult:
    lines = text.splitlines()
    starts = [n for n in range(len(lines)) if _kind_starts(lines, n)]
    if not starts:
        raise SchemaDocError(where, 1, "expected a kind name followed by a 'Scope:' line")
    docs = [
        _read_kind(lines, start, end, where)
        for start, end in zip(starts, [*starts[1:], len(lines)], strict=True)
    ]
    # A kind without an example shares the group that every other kind of the file shows.
    groups = {doc.group for doc in docs if doc.group}
    result = ParseResult()
    for start, doc in zip(starts, docs, strict=True):
        if not doc.group and len(groups) == 1:
            doc.group = next(iter(groups))
        if not doc.group:
            raise SchemaDocError(
                where, start + 1, f"expected an example 'apiVersion: group/version' for {doc.kind}"
            )
        if doc.fields:
            result.kinds.append(doc)
        else:
            result.notices.append(
                f"{where}:{start + 1}: {doc.kind} is documented only by examples "
                f"({len(doc.examples)}), not by fields; no model or CRD generated"
            )
    return result
