"""Explicit edits and the minimal RFC 6902 JSON Patch that carries them.

The defaulter records what it adds as `Edit`s over the raw JSON instead of diffing
two serialisations, so the patch holds exactly the defaulted fields: nothing the
models do not know is dropped or rewritten.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Edit", "encode_patch", "escape_token", "pointer", "to_operations"]


@dataclass(frozen=True)
class Edit:
    """Set `value` at `path` (object keys and list indexes from the root).

    `replace` is for a field present with a null value; otherwise the field is absent
    and its parent exists, which is what makes an `add` apply to the object as sent.
    """

    path: tuple[str | int, ...]
    value: Any
    replace: bool = False


def escape_token(token: str | int) -> str:
    """RFC 6901: `~` becomes `~0` first, then `/` becomes `~1`."""
    text = str(token)
    if "~" in text or "/" in text:
        return text.replace("~", "~0").replace("/", "~1")
    return text


def pointer(path: Sequence[str | int]) -> str:
    return "".join("/" + escape_token(token) for token in path)


def to_operations(edits: Sequence[Edit]) -> list[dict[str, Any]]:
    """The JSON Patch operations of `edits`, in order."""
    return [
        {
            "op": "replace" if edit.replace else "add",
            "path": pointer(edit.path),
            "value": edit.value,
        }
        for edit in edits
    ]


def encode_patch(edits: Sequence[Edit]) -> str | None:
    """The base64 JSON Patch for an AdmissionResponse, or None when there is nothing to do."""
    if not edits:
        return None
    text = json.dumps(to_operations(edits), separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(text.encode()).decode()
