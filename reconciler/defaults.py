"""Schema defaults of the ExporterSet and VirtualTargetClass specs, read from one source.

The documented schema (`schemas/*.txt`) is the only place a default such as
`scaleDownCooldown: 5m` is written. The apiserver applies it to stored objects, but the
reconciler also meets objects that never went through the apiserver (simulation
scenarios, tests, objects written before a default was added), so it reads the same
defaults through `api.schema.openapi_schema`, or, where that is not available, from the
generated Pydantic models, which carry them. No I/O beyond importing those modules.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

__all__ = ["spec_defaults"]


@cache
def spec_defaults(kind: str) -> dict[str, Any]:
    """Defaults of the top-level `spec` fields of `kind`, by their JSON (camelCase) names."""
    try:
        schema_module = importlib.import_module("api.schema")
    except ImportError:
        return _from_models(kind)
    schema = schema_module.openapi_schema(kind)
    fields = schema["properties"]["spec"]["properties"]
    return {name: node["default"] for name, node in fields.items() if "default" in node}


def _from_models(kind: str) -> dict[str, Any]:
    import api.models

    for info in pkgutil.walk_packages(api.models.__path__, "api.models."):
        module = importlib.import_module(info.name)
        model = getattr(module, f"{kind}Spec", None)
        if model is None:
            continue
        result: dict[str, Any] = {}
        for name, field in model.model_fields.items():
            if field.is_required() or field.default is None:
                continue
            value = field.default
            result[field.alias or name] = getattr(value, "value", value)
        return result
    raise LookupError(f"no schema defaults for kind {kind!r}")
