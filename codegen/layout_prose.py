"""Layout 4: descriptions without field names (`kubevirt-virtualmachineinstance.txt`).

    #VirtualMachineInstance [virtualmachineinstances.kubevirt.io/v1]
    <one paragraph per field, in schema order, but no field names>

Field names cannot be recovered from prose, and guessing them would invent an API, so
this layout yields no kinds: only a notice saying what the file holds and why it is skipped.
"""

from __future__ import annotations

import re

from codegen.fieldtree import ParseResult, SchemaDocError

__all__ = ["looks_like", "parse"]

_HEADER = re.compile(r"^#([A-Z][A-Za-z0-9]*) \[([a-z0-9]+)\.([a-z0-9.-]+)/(v[0-9a-z]+)\]\s*$")


def looks_like(text: str) -> bool:
    return text.startswith("#") and bool(_HEADER.match(text.splitlines()[0]))


def parse(text: str, where: str) -> ParseResult:
    lines = text.splitlines()
    header = _HEADER.match(lines[0]) if lines else None
    if header is None:
        raise SchemaDocError(where, 1, "expected a header such as '#Kind [plural.group/version]'")
    kind, _plural, group, version = header.groups()
    paragraphs = sum(
        1 for n, line in enumerate(lines[1:], 1) if line.strip() and not lines[n - 1].strip()
    )
    return ParseResult(
        notices=[
            f"{where}:1: {kind} ({group}/{version}) has {paragraphs} descriptions without "
            "field names; no model or CRD generated"
        ]
    )
