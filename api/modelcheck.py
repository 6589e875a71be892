"""A manifest checked against its generated Pydantic model, with field errors as
kube-apiserver words them.

For a kind this project only models (KubeVirt's VirtualMachineInstance) there is no
webhook logic to run offline: the generated model is the check. Validation is strict and
in JSON mode, so `"2"` where the schema wants an integer fails as it does in the
apiserver instead of being coerced. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from api.fielderrors import FieldError, join_path

__all__ = ["model_errors"]

# Pydantic's type errors, named as the schema names the type.
_TYPES = {
    "int_type": "integer",
    "string_type": "string",
    "bool_type": "boolean",
    "float_type": "number",
    "dict_type": "object",
    "model_type": "object",
    "list_type": "array",
}
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _locate(obj: Any, loc: tuple[int | str, ...]) -> tuple[str, Any]:
    """The field path of an error and the value there: the part of `loc` that names the
    input (the rest names union branches such as `int`), as `spec.volumes[0].name`."""
    path, node = "", obj
    for part in loc:
        named = isinstance(node, Mapping) and isinstance(part, str) and part in node
        indexed = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (named or indexed):
            break
        node = node[part]
        path = join_path(path, part)
    return path, node


def _error(path: str, value: Any, details: list[ErrorDetails]) -> FieldError:
    types = [d["type"] for d in details]
    if "missing" in types:
        return FieldError.required(path)
    if "enum" in types:
        expected = next(d for d in details if d["type"] == "enum").get("ctx", {})["expected"]
        return FieldError.not_supported(path, value, _QUOTED.findall(str(expected)))
    # One error per union branch (int-or-string): the branch of the value's own type
    # speaks unless every branch refused the type.
    other = [d for d in details if d["type"] not in _TYPES]
    if not other:
        names = " or ".join(dict.fromkeys(_TYPES[t] for t in types))
        return FieldError.invalid(path, value, f"must be of type {names}")
    detail = other[0]
    if detail["type"] == "string_pattern_mismatch":
        return FieldError.invalid(path, value, f"should match '{detail['ctx']['pattern']}'")
    return FieldError.invalid(path, value, detail["msg"])


def model_errors(model: type[BaseModel], obj: Mapping[str, Any]) -> list[FieldError]:
    """Every field error of `obj` against `model`, one per field, in the model's order."""
    try:
        model.model_validate_json(json.dumps(obj), strict=True)
    except ValidationError as exc:
        grouped: dict[str, tuple[Any, list[ErrorDetails]]] = {}
        for detail in exc.errors(include_url=False):
            path, value = _locate(obj, detail["loc"])
            if detail["type"] == "missing":  # the last part of `loc` names the absent field
                path, value = join_path(path, detail["loc"][-1]), None
            grouped.setdefault(path, (value, []))[1].append(detail)
        return [_error(path, value, details) for path, (value, details) in grouped.items()]
    return []
