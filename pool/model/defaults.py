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

__all__ = ["field_default", "spec_defaults"]


@cache
def spec_defaults(kind: str, under: str = "spec") -> dict[str, Any]:
    """Defaults of the fields of the object at dotted path `under` (`spec`,
    `spec.caBundleConfigMapRef`) of `kind`, by their JSON (camelCase) names."""
    try:
        schema_module = importlib.import_module("api.schema")
    except ImportError:
        return _from_models(kind, under)
    node = schema_module.openapi_schema(kind)
    for part in under.split("."):
        node = node["properties"][part]
    fields = node["properties"]
    return {name: child["default"] for name, child in fields.items() if "default" in child}


def field_default(kind: str, path: str) -> Any:
    """The default of one field, e.g. `field_default("VirtualTargetClass",
    "spec.caBundleConfigMapRef.key")`; KeyError when the schema has none."""
    under, _, name = path.rpartition(".")
    return spec_defaults(kind, under)[name]


def _from_models(kind: str, under: str) -> dict[str, Any]:
    import api.models

    # datamodel-code-generator names nested models by joining the CamelCased path.
    parts = under.split(".")
    class_name = kind + "".join(p[:1].upper() + p[1:] for p in parts)
    for info in pkgutil.walk_packages(api.models.__path__, "api.models."):
        module = importlib.import_module(info.name)
        model = getattr(module, class_name, None)
        if model is None:
            continue
        result: dict[str, Any] = {}
        for name, field in model.model_fields.items():
            if field.is_required() or field.default is None:
                continue
            value = field.default
            result[field.alias or name] = getattr(value, "value", value)
        return result
    raise LookupError(f"no schema defaults for {kind} {under}")
