"""Explicit edits and the minimal RFC 6902 JSON Patch that carries them.

The defaulter records what it adds as `Edit`s over the raw JSON instead of diffing
two serialisations, so the patch holds exactly the defaulted fields: nothing the
models do not know is dropped or rewritten.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from webhook.jsontext import compact_json

__all__ = ["Edit", "encode_patch", "escape_token", "operation", "pointer", "to_operations"]


class Edit(NamedTuple):  # a tuple: built several times per review, cheaper than a dataclass
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


def operation(edit: Edit) -> dict[str, Any]:
    """The JSON Patch operation of one edit."""
    return {
        "op": "replace" if edit.replace else "add",
        "path": pointer(edit.path),
        "value": edit.value,
    }


def to_operations(edits: Sequence[Edit]) -> list[dict[str, Any]]:
    """The JSON Patch operations of `edits`, in order."""
    return [operation(edit) for edit in edits]


def encode_patch(edits: Sequence[Edit]) -> str | None:
    """The base64 JSON Patch for an AdmissionResponse, or None when there is nothing to do."""
    if not edits:
        return None
    text = "[" + ",".join(map(_operation_json, edits)) + "]"
    return base64.b64encode(text.encode()).decode()


def _operation_json(edit: Edit) -> str:
    value = edit.value
    if value is None or type(value) in _SCALARS:
        # Schema defaults are the same few scalars at the same few paths on every review.
        # The type is part of the key: 1, 1.0 and True are equal as dict keys.
        return _scalar_operation_json(edit.path, type(value).__name__, value, edit.replace)
    return compact_json(operation(edit))


_SCALARS = frozenset((str, int, float, bool))


@lru_cache(maxsize=4096)
def _scalar_operation_json(
    path: tuple[str | int, ...], _type: str, value: Any, replace: bool
) -> str:
    return compact_json(operation(Edit(path, value, replace)))
