"""The structural openAPIV3Schema of each kind, as its generated CRD carries it.

One source for defaults and bounds: the webhook defaults against it and the reconciler
reads its defaults from it, so neither restates a documented value. `make crds` writes
the schemas as package data (`api/models/openapi.json`); this module reads them once and
hands out copies, so a caller cannot change what another caller sees.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["OPENAPI_DATA", "kinds", "openapi_schema"]

# The generated data file, in the `api.models` package (written by codegen.pipeline).
OPENAPI_DATA = "openapi.json"


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    text = resources.files("api.models").joinpath(OPENAPI_DATA).read_text(encoding="utf-8")
    schemas: dict[str, dict[str, Any]] = json.loads(text)
    return schemas


def kinds() -> tuple[str, ...]:
    """The kinds with a generated schema, sorted."""
    return tuple(sorted(_schemas()))


def openapi_schema(kind: str) -> dict[str, Any]:
    """The schema of `kind` (e.g. "ExporterSet"); KeyError names the known kinds."""
    try:
        return copy.deepcopy(_schemas()[kind])
    except KeyError:
        raise KeyError(
            f"no generated schema for kind {kind!r} (known: {', '.join(kinds())})"
        ) from None
