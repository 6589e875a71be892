"""CRD -> a Markdown reference table per kind, read from the generated CRD itself.

Rendering from the CRD (not from the documents) means the reference shows what the
apiserver will enforce, defaults and CEL rules included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

__all__ = ["render_reference"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _type_of(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    type_ = str(node.get("type", "any"))
    if type_ == "array":
        return f"[]{_type_of(node.get('items', {}))}"
    if type_ == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type_of(node['additionalProperties'])}"
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return "object (free-form)"
    return type_


def _rows(node: dict[str, Any], path: str, required: bool) -> Iterator[str]:
    if path:
        notes = []
        if "enum" in node:
            notes.append("One of: " + ", ".join(f"`{v}`" for v in node["enum"]))
        for key in ("pattern", "minLength", "maxLength", "minimum", "maxItems"):
            if key in node:
                notes.append(f"{key}: `{node[key]}`")
        description = " ".join([node.get("description", ""), *notes]).strip()
        default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
        yield (
            f"| `{path}` | {_cell(_type_of(node))} | {'yes' if required else ''} | "
            f"{_cell(default)} | {_cell(description)} |"
        )
    for name in sorted(node.get("properties", {})):
        child = node["properties"][name]
        yield from _rows(
            child, f"{path}.{name}" if path else name, name in node.get("required", [])
        )
    if isinstance(node.get("items"), dict) and node["items"].get("properties"):
        for name in sorted(node["items"]["properties"]):
            child = node["items"]["properties"][name]
            yield from _rows(child, f"{path}[].{name}", name in node["items"].get("required", []))


def _rules(node: dict[str, Any], path: str) -> Iterator[str]:
    for entry in node.get("x-kubernetes-validations", []):
        yield f"| `{path or '.'}` | {_cell(entry['message'])} | `{_cell(entry['rule'])}` |"
    for name in sorted(node.get("properties", {})):
        yield from _rules(node["properties"][name], f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from _rules(node["items"], f"{path}[]")


def render_reference(crd: dict[str, Any], header: str) -> str:
    spec = crd["spec"]
    version = spec["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    names = spec["names"]
    lines = [
        header,
        "",
        f"# {names['kind']}",
        "",
        f"`{spec['group']}/{version['name']}`, {spec['scope']}, plural `{names['plural']}`"
        + (f", short names {', '.join(names['shortNames'])}" if names.get("shortNames") else ""),
        "",
        schema.get("description", ""),
        "",
        "| Field | Type | Required | Default | Description |",
        "| --- | --- | --- | --- | --- |",
        *(
            row
            for row in _rows(schema, "", False)
            if not row.startswith(("| `apiVersion`", "| `kind`", "| `metadata`"))
        ),
    ]
    rules = list(_rules(schema, ""))
    if rules:
        lines += [
            "",
            "## Validation rules",
            "",
            "| Scope | Message | CEL |",
            "| --- | --- | --- |",
            *rules,
        ]
    return "\n".join(lines) + "\n"
