"""The structural openAPIV3Schema of each kind, as its generated CRD carries it.

One source for defaults and bounds: the webhook defaults against it and the reconciler
reads its defaults from it, so neither restates a documented value. The data lives in
the generated `api/models/openapi.py`; this module only hands out copies, so a caller
cannot change what another caller sees.
"""

from __future__ import annotations

import copy
from typing import Any

from api.models.openapi import OPENAPI_SCHEMAS

__all__ = ["KINDS", "openapi_schema"]

KINDS: tuple[str, ...] = tuple(sorted(OPENAPI_SCHEMAS))


def openapi_schema(kind: str) -> dict[str, Any]:
    """The schema of `kind` (e.g. "ExporterSet"); KeyError names the known kinds."""
    try:
        return copy.deepcopy(OPENAPI_SCHEMAS[kind])
    except KeyError:
        raise KeyError(
            f"no generated schema for kind {kind!r} (known: {', '.join(KINDS)})"
        ) from None
