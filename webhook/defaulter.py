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
from typing import Any

from webhook.patch import Edit

__all__ = ["Defaulted", "SchemaSource", "default_object", "schema_edits", "template_label_edits"]

SchemaSource = Callable[[str], Mapping[str, Any]]
Defaulted = tuple[dict[str, Any], list[Edit]]


def default_object(kind: str, obj: Mapping[str, Any], schema_source: SchemaSource) -> Defaulted:
    """A defaulted deep copy of `obj` and the edits that produced it (empty when complete)."""
    result: dict[str, Any] = copy.deepcopy(dict(obj))
    edits = schema_edits(result, schema_source(kind))
    if kind == "ExporterSet":
        edits += template_label_edits(result)
    return result, edits


def schema_edits(obj: dict[str, Any], schema: Mapping[str, Any]) -> list[Edit]:
    """Fill schema defaults into `obj` in place; return one edit per filled field."""
    edits: list[Edit] = []
    _walk(obj, schema, (), edits)
    return edits


def _walk(
    node: Any, schema: Mapping[str, Any], path: tuple[str | int, ...], edits: list[Edit] | None
) -> None:
    """Default inside `node`; `edits` is None inside a value that is itself a new edit."""
    if isinstance(node, dict):
        properties = schema.get("properties") or {}
        for name, child in properties.items():
            if "default" not in child:
                continue
            absent = name not in node
            if absent or (node[name] is None and not child.get("nullable", False)):
                node[name] = copy.deepcopy(child["default"])
                if edits is not None:
                    edits.append(Edit((*path, name), node[name], replace=not absent))
                _walk(node[name], child, (*path, name), None)
        additional = schema.get("additionalProperties")
        for name, value in node.items():
            if name in properties:
                _walk(value, properties[name], (*path, name), edits)
            elif isinstance(additional, Mapping):
                _walk(value, additional, (*path, name), edits)
    elif isinstance(node, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(node):
            _walk(item, schema["items"], (*path, index), edits)


def template_label_edits(obj: dict[str, Any]) -> list[Edit]:
    """Copy `spec.selector.matchLabels` into a template that has no labels, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("selector"), Mapping):
        return []
    wanted = spec["selector"].get("matchLabels")
    if not isinstance(wanted, Mapping) or not wanted:
        return []
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in wanted.items()):
        return []
    labels = dict(wanted)
    if "template" not in spec:
        spec["template"] = {"metadata": {"labels": labels}}
        return [Edit(("spec", "template"), spec["template"])]
    template = spec["template"]
    if not isinstance(template, dict):
        return []
    if "metadata" not in template or template["metadata"] is None:
        replace = "metadata" in template
        template["metadata"] = {"labels": labels}
        return [Edit(("spec", "template", "metadata"), template["metadata"], replace=replace)]
    metadata = template["metadata"]
    if not isinstance(metadata, dict) or metadata.get("labels"):
        return []
    replace = "labels" in metadata
    metadata["labels"] = labels
    return [Edit(("spec", "template", "metadata", "labels"), labels, replace=replace)]
