"""Field tree + overlay -> one JSON Schema per kind, structural from the start.

The schema is built inline (no `$ref`), with a type on every node, so that the CRD is
this schema minus titles, and the models are generated from this same schema: both
views come from one tree, so they cannot disagree about a field.

Objects the documents leave empty must be given a shape by the overlay (free-form,
string map, Kubernetes type, or a literal fragment); otherwise the build stops and
names the field, rather than emitting a schema kube-apiserver would prune to nothing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from codegen.fieldtree import Field, KindDoc, SchemaDocError
from codegen.k8stypes import KUBERNETES_TYPES, ROOT_FIELDS
from codegen.overlay import KindOverlay, OverlayError

__all__ = ["build_schema", "crd_view", "model_view", "node_at", "split_path"]

Schema = dict[str, Any]


def split_path(path: str) -> list[str]:
    """`spec.tolerations[].key` -> `["spec", "tolerations", "[]", "key"]`."""
    out: list[str] = []
    for part in path.split("."):
        if part.endswith("[]"):
            out.extend([part[:-2], "[]"])
        else:
            out.append(part)
    return out


def node_at(schema: Schema, path: str, create_items: bool = False) -> Schema | None:
    """The schema node at a field path, or None when the path is not in the schema."""
    node: Schema | None = schema
    for part in split_path(path):
        if node is None:
            return None
        if part == "[]":
            if node.get("type") != "array":
                return None
            if "items" not in node and create_items:
                node["items"] = {"type": "object"}
            node = node.get("items")
        else:
            node = node.get("properties", {}).get(part)
    return node


def _title(kind: str, path: str) -> str:
    words = [kind]
    for part in split_path(path):
        words.append("Item" if part == "[]" else part[:1].upper() + part[1:])
    return "".join(words)


def _field_node(field: Field) -> Schema:
    node: Schema
    if field.type == "int-or-string":
        node = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    else:
        node = {"type": field.type}
    if field.items:
        node["items"] = {"type": field.items}
    if field.description:
        node["description"] = field.description
    if field.enum:
        node["enum"] = list(field.enum)
    if field.has_default:
        node["default"] = field.default
    for key, value in (
        ("pattern", field.pattern),
        ("minLength", field.min_length),
        ("maxLength", field.max_length),
        ("minimum", field.minimum),
    ):
        if value is not None:
            node[key] = value
    return node


def _merge(node: Schema, fragment: Schema) -> None:
    """Add what `fragment` says and `node` does not; the document's own words win."""
    for key, value in fragment.items():
        if key == "properties":
            props = node.setdefault("properties", {})
            for name, child in value.items():
                if name in props:
                    _merge(props[name], child)
                else:
                    props[name] = copy.deepcopy(child)
        elif key in ("items", "additionalProperties") and isinstance(node.get(key), dict):
            _merge(node[key], value)
        elif key == "required":
            node["required"] = [
                *node.get("required", []),
                *(v for v in value if v not in node.get("required", [])),
            ]
        elif key not in node:
            node[key] = copy.deepcopy(value)


def _place(root: Schema, field: Field, where: str) -> None:
    parts = split_path(field.path)
    parent: Schema = root
    walked: list[str] = []
    for part in parts[:-1]:
        walked.append(part)
        if part == "[]":
            parent = parent.setdefault("items", {"type": "object"})
            continue
        props = parent.setdefault("properties", {})
        if part not in props:
            if len(walked) == 1:  # `spec` and `status` are implied by the table sections
                props[part] = {"type": "object"}
            else:
                missing = ".".join(walked).replace(".[]", "[]")
                raise SchemaDocError(where, field.line, f"expected {missing} before {field.path}")
        parent = props[part]
    name = parts[-1]
    parent.setdefault("properties", {})[name] = _field_node(field)
    if field.required:
        parent.setdefault("required", []).append(name)


def _overlay_node(schema: Schema, path: str, what: str, kind: str) -> Schema:
    node = node_at(schema, path, create_items=True)
    if node is None:
        raise OverlayError(f"schemas/overlay.yaml: kinds.{kind}.{what}: {kind} has no field {path}")
    return node


def _apply_overlay(schema: Schema, kind: str, overlay: KindOverlay) -> None:
    for path in overlay.required:
        parent_path, _, name = path.rpartition(".")
        parent = _overlay_node(schema, parent_path, "required", kind) if parent_path else schema
        if name not in parent.get("properties", {}):
            raise OverlayError(
                f"schemas/overlay.yaml: kinds.{kind}.required: {kind} has no field {path}"
            )
        if name not in parent.get("required", []):
            parent.setdefault("required", []).append(name)
    for path in overlay.freeForm:
        _overlay_node(schema, path, "freeForm", kind)["x-kubernetes-preserve-unknown-fields"] = True
    for path in overlay.stringMaps:
        _overlay_node(schema, path, "stringMaps", kind)["additionalProperties"] = {"type": "string"}
    for path, type_name in overlay.kubernetesTypes.items():
        if type_name not in KUBERNETES_TYPES:
            known = ", ".join(KUBERNETES_TYPES)
            raise OverlayError(
                f"schemas/overlay.yaml: kinds.{kind}.kubernetesTypes.{path}: "
                f"unknown type {type_name!r} (known: {known})"
            )
        _merge(_overlay_node(schema, path, "kubernetesTypes", kind), KUBERNETES_TYPES[type_name])
    for path, fragment in overlay.schemas.items():
        _merge(_overlay_node(schema, path, "schemas", kind), fragment)
    for path, list_type in overlay.listTypes.items():
        node = _overlay_node(schema, path, "listTypes", kind)
        list_kind, _, keys = list_type.partition(":")
        node["x-kubernetes-list-type"] = list_kind
        if keys:
            node["x-kubernetes-list-map-keys"] = keys.split(",")


def _check_shapes(node: Schema, path: str, lines: dict[str, int], where: str) -> None:
    """Every object needs a shape and every array its items, or the apiserver prunes them."""
    line = lines.get(path, 1)
    if node.get("type") == "object" and path != "metadata":
        shaped = "properties" in node or "additionalProperties" in node
        if not shaped and not node.get("x-kubernetes-preserve-unknown-fields"):
            raise SchemaDocError(
                where,
                line,
                f"expected fields under {path}, or an overlay entry saying it is free-form, "
                "a string map or a Kubernetes type",
            )
    if node.get("type") == "array" and "items" not in node:
        raise SchemaDocError(
            where, line, f"expected an item type for the array {path} (overlay: schemas)"
        )
    for name, child in node.get("properties", {}).items():
        _check_shapes(child, f"{path}.{name}" if path else name, lines, where)
    if "items" in node:
        _check_shapes(node["items"], f"{path}[]", lines, where)


def _add_titles(node: Schema, kind: str, path: str) -> None:
    if (node.get("type") == "object" and ("properties" in node or not path)) or "enum" in node:
        node["title"] = _title(kind, path)
    for name, child in node.get("properties", {}).items():
        _add_titles(child, kind, f"{path}.{name}" if path else name)
    if "items" in node:
        _add_titles(node["items"], kind, f"{path}[]")


def build_schema(doc: KindDoc, overlay: KindOverlay) -> Schema:
    """The kind's full object schema, with titles (which name the generated classes)."""
    if doc.schema is not None:
        # Read against a reference schema: shaped and titled already; the overlay still applies.
        schema = copy.deepcopy(doc.schema)
        _apply_overlay(schema, doc.kind, overlay)
        return schema
    schema = {"type": "object", "properties": {}}
    if doc.description:
        schema["description"] = doc.description
    for field in doc.fields:
        _place(schema, field, doc.file)
    for name, fragment in ROOT_FIELDS.items():
        _merge(schema["properties"].setdefault(name, {}), fragment)
    _apply_overlay(schema, doc.kind, overlay)
    _check_shapes(schema, "", {f.path: f.line for f in doc.fields}, doc.file)
    _add_titles(schema, doc.kind, "")
    return schema


def _walk(node: Schema, visit: Any) -> None:
    visit(node)
    for child in node.get("properties", {}).values():
        _walk(child, visit)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            _walk(node[key], visit)


def crd_view(schema: Schema) -> Schema:
    """The schema as a CRD carries it: no titles."""
    out = copy.deepcopy(schema)
    _walk(out, lambda node: node.pop("title", None))
    return out


def _children(node: Schema) -> list[Schema]:
    found = list(node.get("properties", {}).values())
    found += [
        node[key] for key in ("items", "additionalProperties") if isinstance(node.get(key), dict)
    ]
    return found


def _shape(node: Schema) -> str:
    return json.dumps({k: v for k, v in node.items() if k != "description"}, sort_keys=True)


def _share_definitions(schema: Schema) -> Schema:
    """A titled node that recurs with one shape (a reference definition used in several
    places) becomes one `$defs` entry, so the generator writes one class for it instead of
    numbered copies. Titles built from paths never recur, so other kinds are unchanged."""
    shapes: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    pending = _children(schema)
    while pending:
        node = pending.pop()
        if "title" in node:
            shapes.setdefault(node["title"], set()).add(_shape(node))
            counts[node["title"]] = counts.get(node["title"], 0) + 1
        pending += _children(node)
    shared = {title for title, found in shapes.items() if counts[title] > 1 and len(found) == 1}
    definitions: dict[str, Schema] = {}

    def rewrite(node: Schema) -> Schema:
        for name, child in node.get("properties", {}).items():
            node["properties"][name] = shared_or_inline(child)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                node[key] = shared_or_inline(node[key])
        return node

    def shared_or_inline(node: Schema) -> Schema:
        title = node.get("title")
        if title not in shared:
            return rewrite(node)
        if title not in definitions:
            definitions[title] = {}
            definitions[title] = rewrite({k: v for k, v in node.items() if k != "description"})
        ref: Schema = {"$ref": f"#/$defs/{title}"}
        if "description" in node:
            ref["description"] = node["description"]
        return ref

    out = rewrite(schema)
    if definitions:
        out["$defs"] = dict(sorted(definitions.items()))
    return out


def model_view(schema: Schema) -> Schema:
    """The schema as the model generator reads it: an int-or-string pattern binds the
    string, and recurring definitions are shared."""
    out = copy.deepcopy(schema)

    def visit(node: Schema) -> None:
        if node.get("x-kubernetes-int-or-string") and "pattern" in node:
            node["anyOf"] = [
                {"type": "integer"},
                {"type": "string", "pattern": node.pop("pattern")},
            ]

    _walk(out, visit)
    return _share_definitions(out)
