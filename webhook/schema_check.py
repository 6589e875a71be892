"""Types, enums, required fields and string lengths from the CRD schema, on the raw object.

kube-apiserver runs this validation itself between the mutating and the validating
webhooks, but the offline `virtualtarget validate` has no apiserver, and the mutating
endpoint sees objects before it: the later checks rely on the types being right.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError, join_path

__all__ = ["schema_errors"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def schema_errors(node: Any, schema: Mapping[str, Any], path: str = "") -> list[FieldError]:
    """Type, enum, required-field and string-length errors of `node` against a structural
    schema, every one of them, worded as kube-apiserver words them."""
    if node is None:
        return [] if schema.get("nullable") or not path else [_type_error(node, schema, path)]
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(node, bool) or not isinstance(node, int | str):
            return [FieldError.invalid(path, node, "must be an integer or a string")]
        return []
    if isinstance(expected, str) and expected in _TYPES:
        wrong = not isinstance(node, _TYPES[expected])
        if isinstance(node, bool) and expected in ("integer", "number"):
            wrong = True
        if wrong:
            return [_type_error(node, schema, path)]
    if "enum" in schema and node not in schema["enum"]:
        return [FieldError.not_supported(path, node, [str(v) for v in schema["enum"]])]
    if isinstance(node, str):
        return _length_errors(node, schema, path)
    errors: list[FieldError] = []
    if isinstance(node, dict):
        errors += [
            FieldError.required(join_path(path, name))
            for name in schema.get("required") or ()
            if name not in node
        ]
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for name, value in node.items():
            child = properties.get(name)
            if child is None and isinstance(additional, Mapping):
                child = additional
            if child is not None and not _plainly_valid(value, child):
                errors += schema_errors(value, child, join_path(path, str(name)))
    elif isinstance(node, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(node):
            if not _plainly_valid(item, schema["items"]):
                errors += schema_errors(item, schema["items"], join_path(path, index))
    return errors


# Leaves that need no walk: most of an object. Skipping them also skips building their
# field paths, which only an error needs.
_PLAIN_LEAVES = {"string": str, "integer": int, "boolean": bool}


def _plainly_valid(node: Any, schema: Mapping[str, Any]) -> bool:
    leaf = _PLAIN_LEAVES.get(schema.get("type", ""))
    return (
        leaf is not None
        and type(node) is leaf
        and "enum" not in schema
        and "minLength" not in schema
        and "maxLength" not in schema
    )


def _length_errors(node: str, schema: Mapping[str, Any], path: str) -> list[FieldError]:
    shortest, longest = schema.get("minLength"), schema.get("maxLength")
    if isinstance(shortest, int) and len(node) < shortest:
        return [FieldError.invalid(path, node, f"should be at least {shortest} chars long")]
    if isinstance(longest, int) and len(node) > longest:
        return [FieldError.invalid(path, node, f"may not be more than {longest} chars long")]
    return []


def _type_error(node: Any, schema: Mapping[str, Any], path: str) -> FieldError:
    return FieldError.invalid(path, node, f"must be of type {schema.get('type', 'object')}")
