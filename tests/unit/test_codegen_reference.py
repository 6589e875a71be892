"""A Swagger 2.0 reference read as one structural schema, its fields in the page's order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from codegen.fieldtree import SchemaDocError
from codegen.jsonschema import crd_view, node_at
from codegen.k8stypes import QUANTITY
from codegen.reference import read_reference
from codegen.structural import check_schema

WHERE = "schemas/tree.swagger.json"
DEFINITIONS: dict[str, Any] = {
    "v1.Tree": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": {"$ref": "#/definitions/meta.v1.ObjectMeta", "default": {}},
            "spec": {"$ref": "#/definitions/v1.TreeSpec", "default": {}},
        },
    },
    "meta.v1.ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}},
    "v1.TreeSpec": {
        "type": "object",
        "nullable": True,
        "properties": {
            "root": {"$ref": "#/definitions/v1.Node", "description": "The first node."},
            "memory": {"$ref": "#/definitions/k8s.io.apimachinery.pkg.api.resource.Quantity"},
            "port": {"type": ["string", "number"]},
            "since": {"type": ["string", "null"]},
            "claims": {
                "type": "array",
                "items": {"$ref": "#/definitions/v1.Claim", "default": {}},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "x-kubernetes-patch-merge-key": "name",
                "x-kubernetes-patch-strategy": "merge",
            },
            "claim": {"$ref": "#/definitions/k8s.io.api.core.v1.Claim"},
            "policy": {"type": "string", "enum": ["Always", "Never"]},
        },
    },
    "v1.Node": {
        "type": "object",
        "description": "A node of the tree.",
        "properties": {
            "value": {"type": "integer", "format": "int32", "default": 0},
            "children": {"type": "array", "items": {"$ref": "#/definitions/v1.Node"}},
        },
    },
    "v1.Claim": {"type": "object", "properties": {"name": {"type": "string", "default": ""}}},
    "k8s.io.api.core.v1.Claim": {"type": "object", "properties": {"uid": {"type": "string"}}},
    "k8s.io.apimachinery.pkg.api.resource.Quantity": {"type": ["string", "integer", "number"]},
}


def _text(definitions: dict[str, Any]) -> str:
    return json.dumps({"swagger": "2.0", "definitions": definitions}, indent=1)


def test_fields_come_in_the_page_order_with_their_reference_text() -> None:
    tree = read_reference(_text(DEFINITIONS), WHERE, "Tree")
    assert [(f.path, f.type) for f in tree.fields] == [
        ("metadata", "object"),
        ("spec", "object"),
        ("spec.claim", "object"),
        ("spec.claims", "array"),
        ("spec.memory", "int-or-string"),
        ("spec.policy", "string"),
        ("spec.port", "int-or-string"),
        ("spec.root", "object"),
        ("spec.since", "string"),
        ("spec.claim.uid", "string"),
        ("spec.claims[].name", "string"),
        ("spec.root.children", "array"),
        ("spec.root.value", "integer"),
    ]
    texts = {f.path: f.text for f in tree.fields}
    assert texts["spec.root"] == "The first node."  # its own text over the definition's
    assert texts["spec.claim"] == ""


def test_the_schema_is_structural_and_says_what_kubernetes_means() -> None:
    tree = read_reference(_text(DEFINITIONS), WHERE, "Tree")
    schema = tree.schema
    assert check_schema(crd_view(schema)) == []
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["required"] == ["spec"]
    assert node_at(schema, "spec.memory") == QUANTITY
    assert node_at(schema, "spec.port") == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    assert node_at(schema, "spec.since") == {"type": "string"}  # null is pruned anyway
    # Go zero values are not defaults, except where a list-map key needs one.
    assert node_at(schema, "spec.root.value") == {"type": "integer", "format": "int32"}
    assert node_at(schema, "spec.claims[].name") == {"type": "string", "default": ""}
    claims = node_at(schema, "spec.claims")
    assert claims is not None and not any(k.startswith("x-kubernetes-patch") for k in claims)
    assert "nullable" not in schema["properties"]["spec"]
    # Titles name the generated classes: the definition's, with a package prefix on a clash.
    titles = [
        (node_at(schema, p) or {}).get("title") for p in ("spec", "spec.claims[]", "spec.claim")
    ]
    assert titles == ["TreeSpec", "Claim", "CoreClaim"]
    assert node_at(schema, "spec.policy") == {
        "type": "string",
        "enum": ["Always", "Never"],
        "title": "TreeSpecPolicy",
    }


def test_a_recursive_definition_is_cut_where_it_recurs() -> None:
    tree = read_reference(_text(DEFINITIONS), WHERE, "Tree")
    assert node_at(tree.schema, "spec.root.children[]") == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert tree.cuts == ["spec.root.children[] (v1.Node)"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"v1.Node": {"type": "object", "x-custom": 1, "properties": {}}},
            f"{WHERE}:76: v1.Node: expected known schema keys at spec.root, found 'x-custom'",
        ),
        (
            {"v1.Node": {"type": ["integer", "boolean"]}},
            f"{WHERE}:76: v1.Node: expected a type the apiserver can check at spec.root, "
            "found ['integer', 'boolean']",
        ),
        (
            {"v1.Tree": {"type": "object", "properties": {"x": {"$ref": "#/definitions/no"}}}},
            f"{WHERE}:4: v1.Tree: expected #/definitions/no to name a definition of this file",
        ),
    ],
)
def test_a_reference_it_cannot_express_names_file_line_and_definition(
    change: dict[str, Any], expected: str
) -> None:
    with pytest.raises(SchemaDocError) as caught:
        read_reference(_text({**DEFINITIONS, **change}), WHERE, "Tree")
    assert str(caught.value) == expected


def test_not_json_or_no_root_is_an_error() -> None:
    with pytest.raises(SchemaDocError, match=r"tree\.swagger\.json:2: expected JSON"):
        read_reference('{\n "definitions": ,\n}', WHERE, "Tree")
    with pytest.raises(SchemaDocError, match="expected one definition named Forest, found none"):
        read_reference(_text(DEFINITIONS), WHERE, "Forest")
