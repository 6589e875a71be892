"""The CRD schemas the webhook defaults and type-checks against.

The documented schema is the single source of defaults (`api.schema`); this module only
caches it per kind, since it does not change while the process runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from api.schema import openapi_schema

__all__ = ["crd_schema"]


@cache
def crd_schema(kind: str) -> Mapping[str, Any]:
    """The structural openAPIV3Schema of `kind`, with its `default` keys."""
    schema: Mapping[str, Any] = openapi_schema(kind)
    return schema
