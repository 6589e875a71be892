"""Defaulting: the documented schema defaults plus the template labels, as explicit edits.

Schema defaults are applied the way kube-apiserver's structural defaulting applies
them: a property's `default` fills an absent field (or a null one that is not
nullable) only when its parent object exists, and defaulting then continues inside the
filled value. So `spec.caBundleConfigMapRef.key` appears only when the reference is
given, and the webhook's result equals the apiserver's own.

One default is not in the schema: an ExporterSet template without labels gets the
selector's `matchLabels`, so the pool's selector matches the instances it creates.

Works on the raw JSON: fields the schema does not know pass through untouched.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.patch import Edit

__all__ = ["Defaulted", "SchemaSource", "default_object", "schema_edits", "template_label_edits"]

SchemaSource = Callable[[str], Mapping[str, Any]]
Defaulted = tuple[dict[str, Any], list[Edit]]


def default_object(
    kind: str, obj: Mapping[str, Any], schema_source: SchemaSource, *, in_place: bool = False
) -> Defaulted:
    """A defaulted deep copy of `obj` (or `obj` itself, `in_place`, when the caller owns
    it) and the edits that produced it (empty when complete)."""
    result: dict[str, Any] = obj if in_place and isinstance(obj, dict) else copy.deepcopy(dict(obj))
    edits = schema_edits(result, schema_source(kind))
    if kind == "ExporterSet":
        edits += template_label_edits(result)
    return result, edits


def schema_edits(obj: dict[str, Any], schema: Mapping[str, Any]) -> list[Edit]:
    """Fill schema defaults into `obj` in place; return one edit per filled field."""
    edits: list[Edit] = []
    plan = _plan(schema)
    if plan is not None:
        _walk(obj, plan, (), edits)
    return edits


@dataclass(frozen=True)
class _Plan:
    """The part of a schema node that defaulting needs: its defaulted properties and the
    children under which some default lives. Subtrees without defaults are never walked."""

    schema: Mapping[str, Any]
    # (name, default, nullable, whether the default is an object or list to copy)
    defaults: tuple[tuple[str, Any, bool, bool], ...]
    properties: dict[str, _Plan]
    additional: _Plan | None
    items: _Plan | None


# id -> (schema, plan). Keeping the schema alive keeps its id from being reused.
_PLANS: dict[int, tuple[Mapping[str, Any], _Plan | None]] = {}


def _plan(schema: Mapping[str, Any]) -> _Plan | None:
    """The defaulting plan of `schema`, or None when nothing below it has a default.
    Cached by identity: the CRD schemas are loaded once and never change."""
    cached = _PLANS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _PLANS[id(schema)] = (schema, _build_plan(schema))
    return cached[1]


def _build_plan(schema: Mapping[str, Any]) -> _Plan | None:
    properties = schema.get("properties") or {}
    children = {name: _plan(child) for name, child in properties.items()}
    additional = schema.get("additionalProperties")
    items = schema.get("items")
    plan = _Plan(
        schema=schema,
        defaults=tuple(
            (
                name,
                child["default"],
                bool(child.get("nullable", False)),
                isinstance(child["default"], dict | list),
            )
            for name, child in properties.items()
            if "default" in child
        ),
        properties={name: child for name, child in children.items() if child is not None},
        additional=_plan(additional) if isinstance(additional, Mapping) else None,
        items=_plan(items) if isinstance(items, Mapping) else None,
    )
    if plan.defaults or plan.properties or plan.additional or plan.items:
        return plan
    return None


def _walk(node: Any, plan: _Plan, path: tuple[str | int, ...], edits: list[Edit] | None) -> None:
    """Default inside `node`; `edits` is None inside a value that is itself a new edit."""
    if isinstance(node, dict):
        for name, default, nullable, mutable in plan.defaults:
            absent = name not in node
            if absent or (node[name] is None and not nullable):
                # Scalars are shared safely; only objects and lists need their own copy.
                value = node[name] = copy.deepcopy(default) if mutable else default
                if edits is not None:
                    edits.append(Edit((*path, name), value, not absent))
                child = plan.properties.get(name)
                if child is not None:
                    _walk(node[name], child, (*path, name), None)
        for name, child in plan.properties.items():
            if name in node:
                _walk(node[name], child, (*path, name), edits)
        if plan.additional is not None:
            known = plan.schema.get("properties") or {}
            for name, value in node.items():
                if name not in known:
                    _walk(value, plan.additional, (*path, name), edits)
    elif isinstance(node, list) and plan.items is not None:
        for index, item in enumerate(node):
            _walk(item, plan.items, (*path, index), edits)


def template_label_edits(obj: dict[str, Any]) -> list[Edit]:
    """Copy `spec.selector.matchLabels` into a template that has no labels, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    template = spec.get("template")
    metadata = template.get("metadata") if isinstance(template, dict) else None
    if isinstance(metadata, dict) and metadata.get("labels"):
        return []  # the usual case: the template has its labels
    selector = spec.get("selector")
    wanted = selector.get("matchLabels") if isinstance(selector, dict) else None
    if not wanted or not isinstance(wanted, dict):
        return []
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in wanted.items()):
        return []
    labels = dict(wanted)
    if "template" not in spec:
        spec["template"] = {"metadata": {"labels": labels}}
        return [Edit(("spec", "template"), spec["template"])]
    if not isinstance(template, dict):
        return []
    if metadata is None:
        replace = "metadata" in template
        template["metadata"] = {"labels": labels}
        return [Edit(("spec", "template", "metadata"), template["metadata"], replace)]
    if not isinstance(metadata, dict):
        return []
    replace = "labels" in metadata
    metadata["labels"] = labels
    return [Edit(("spec", "template", "metadata", "labels"), labels, replace)]
