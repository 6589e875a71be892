"""Our own structural-schema check, run on every generated CRD.

kube-apiserver rejects a CRD whose schema is not structural, and kubernetes-validate
does not check these rules, so this module does, following
k8s.io/apiextensions-apiserver/pkg/apiserver/schema (ValidateStructural) and the
extras the project requires: no titles, no `$ref`, defaults that validate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["check_crd", "check_schema"]

Schema = dict[str, Any]

_FORBIDDEN = ("$ref", "$defs", "definitions", "title", "nullable", "oneOf", "allOf", "not")
_IN_JUNCTOR = ("type", "description", "default", "additionalProperties", "nullable", "title")
_PYTHONIC: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def _default_problems(node: Schema, value: Any, path: str) -> Iterator[str]:
    type_ = node.get("type")
    if node.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            yield f"{path}: default {value!r} is neither integer nor string"
        return
    expected = _PYTHONIC.get(type_ or "")
    if (
        expected is None
        or not isinstance(value, expected)
        or (type_ != "boolean" and isinstance(value, bool))
    ):
        yield f"{path}: default {value!r} is not of type {type_}"
        return
    if "enum" in node and value not in node["enum"]:
        yield f"{path}: default {value!r} is not one of {node['enum']}"
    if isinstance(value, str):
        if "pattern" in node and not re.search(node["pattern"], value):
            yield f"{path}: default {value!r} does not match {node['pattern']}"
        if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", len(value)):
            yield f"{path}: default {value!r} breaks the length bounds"
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and (value < node.get("minimum", value) or value > node.get("maximum", value))
    ):
        yield f"{path}: default {value!r} is out of bounds"
    if isinstance(value, dict):
        for name, child in value.items():
            sub = node.get("properties", {}).get(name) or node.get("additionalProperties")
            if isinstance(sub, dict):
                yield from _default_problems(sub, child, f"{path}.{name}")


def _junctor_problems(node: Schema, path: str) -> Iterator[str]:
    branches = node.get("anyOf")
    if branches is None:
        return
    if node.get("x-kubernetes-int-or-string") and branches == [
        {"type": "integer"},
        {"type": "string"},
    ]:
        return
    for i, branch in enumerate(branches):
        if any(key in branch for key in _IN_JUNCTOR):
            listed = ", ".join(k for k in _IN_JUNCTOR if k in branch)
            yield f"{path}.anyOf[{i}]: may not set {listed}"
        if branch.get("type") == "null":
            yield f"{path}.anyOf[{i}]: null is not a type in a structural schema"


def check_schema(node: Schema, path: str = "<root>", root: bool = True) -> list[str]:
    """Every structural problem under `node`, as `path: problem`; empty when structural."""
    problems: list[str] = []
    for key in _FORBIDDEN:
        if key in node:
            problems.append(f"{path}: {key} is not allowed")
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if "type" not in node and not (preserve or int_or_string):
        problems.append(f"{path}: type is missing")
    if node.get("type") == "null" or isinstance(node.get("type"), list):
        problems.append(f"{path}: type must be one of the named types")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if node.get("type") == "array" and not isinstance(node.get("items"), dict):
        problems.append(f"{path}: an array needs a single items schema")
    if node.get("type") not in (None, "object") and (
        "properties" in node or "additionalProperties" in node
    ):
        problems.append(f"{path}: only objects may have properties")
    problems.extend(_junctor_problems(node, path))
    if "default" in node:
        if root:
            problems.append(f"{path}: the root may not have a default")
        problems.extend(_default_problems(node, node["default"], path))
    if node.get("x-kubernetes-list-type") == "map":
        items = node.get("items", {})
        for key in node.get("x-kubernetes-list-map-keys", []):
            sub = items.get("properties", {}).get(key)
            if sub is None:
                problems.append(f"{path}: list-map key {key} is not a property of the items")
            elif key not in items.get("required", []) and "default" not in sub:
                problems.append(f"{path}: list-map key {key} must be required or defaulted")
    elif "x-kubernetes-list-map-keys" in node:
        problems.append(f"{path}: list-map keys need x-kubernetes-list-type: map")
    for name, child in node.get("properties", {}).items():
        problems.extend(check_schema(child, f"{path}.{name}".removeprefix("<root>."), False))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems.extend(check_schema(node[key], f"{path}.{key}", False))
    return problems


def check_crd(crd: dict[str, Any]) -> list[str]:
    """Structural problems of every version of a CRD, prefixed with the CRD name."""
    name = crd.get("metadata", {}).get("name", "<unnamed>")
    problems: list[str] = []
    for version in crd.get("spec", {}).get("versions", []):
        schema = version.get("schema", {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            problems.append(f"{name} {version.get('name')}: no openAPIV3Schema")
            continue
        metadata = schema.get("properties", {}).get("metadata", {})
        if set(metadata) - {"type"}:
            problems.append(f"{name}: metadata may only be given a type")
        problems.extend(f"{name} {version['name']}: {p}" for p in check_schema(schema))
    return problems
