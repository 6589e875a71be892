"""Compact JSON text for answers, patches and memo keys, from one encoder built once.

`json.dumps` and `JSONEncoder.encode` set up a new C encoder on every call, which costs
more than encoding a whole AdmissionReview answer; this module sets it up once. There is
no cycle check: what it encodes is decoded JSON or an answer built from it.
"""

from __future__ import annotations

import json
from json import encoder
from typing import Any

__all__ = ["compact_json"]


def _unencodable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_make_c_encoder = getattr(encoder, "c_make_encoder", None)  # CPython's _json, untyped

if _make_c_encoder is not None:
    _C_ENCODER = _make_c_encoder(
        None, _unencodable, encoder.encode_basestring, None, ":", ",", False, False, True
    )

    def compact_json(value: Any) -> str:
        return "".join(_C_ENCODER(value, 0))

else:  # pragma: no cover - CPython always has the C encoder
    _ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

    def compact_json(value: Any) -> str:
        return _ENCODER.encode(value)
