"""CRD -> a Markdown reference table per kind, read from the generated CRD itself.

Rendering from the CRD (not from the documents) means the reference shows what the
apiserver will enforce, defaults and CEL rules included. A kind read against a reference
schema also gets its coverage: the reference fields the page does not describe are
listed, not silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from codegen.fieldtree import Coverage

__all__ = ["coverage_line", "render_reference"]


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


def coverage_line(coverage: Coverage) -> str:
    """The figures `make crds` prints and the docs repeat."""
    return (
        f"{coverage.paragraphs}/{coverage.paragraphs} paragraphs placed, "
        f"{coverage.described}/{coverage.fields} reference fields described"
    )


def _coverage(coverage: Coverage) -> list[str]:
    lines = [
        "",
        "## Coverage",
        "",
        f"The descriptions are the paragraphs of `{coverage.page}`, each placed on the field of "
        f"`{coverage.reference}` it describes: {coverage_line(coverage)}. `metadata` is "
        "ObjectMeta, kept by the apiserver: a CRD gives it only a type, so its fields are "
        "not counted. This CRD is for tests and offline validation; a cluster uses the CRD "
        "that the kind's own project installs.",
    ]
    if coverage.abridged:
        fields = ", ".join(f"`{path}`" for path in coverage.abridged)
        lines += [
            "",
            f"The page gives only the first sentences of the reference's text for {fields}.",
        ]
    cuts = ", ".join(f"`{cut}`" for cut in coverage.cuts)
    lines += [
        "",
        f"Recursive definitions are cut at {cuts}: below that point the CRD keeps whatever "
        "is sent (`x-kubernetes-preserve-unknown-fields`)."
        if cuts
        else "No definition of the reference contains itself, so no part of it is cut.",
    ]
    lines += [
        "",
        f"### Reference fields the page does not describe ({len(coverage.undescribed)})",
        "",
        "| Field | Type |",
        "| --- | --- |",
        *(f"| `{path}` | {type_} |" for path, type_ in coverage.undescribed),
    ]
    return lines


def render_reference(crd: dict[str, Any], header: str, coverage: Coverage | None = None) -> str:
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
    if coverage is not None:
        lines += _coverage(coverage)
    return "\n".join(lines) + "\n"
