"""Compact JSON text for answers and patches, from one encoder built once.

`json.dumps` with non-default options builds a new encoder on every call.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["compact_json"]

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def compact_json(value: Any) -> str:
    return _ENCODER.encode(value)
