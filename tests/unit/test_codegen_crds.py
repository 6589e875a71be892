"""Generated CRDs: structural, faithful to every documented field, carrying the rule table."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from api.rules import RULES
from api.schema import openapi_schema
from codegen.crd import validation_entry
from codegen.fieldtree import KindDoc
from codegen.jsonschema import node_at
from codegen.output import stale_files
from codegen.overlay import OverlayError, load_overlay
from codegen.pipeline import Generated, generate
from codegen.sources import read_sources
from codegen.structural import check_crd, check_schema

ROOT = Path(__file__).resolve().parents[2]


@cache
def _generated() -> Generated:
    return generate(ROOT)


def _docs() -> list[KindDoc]:
    overlay = load_overlay(ROOT / "schemas" / "overlay.yaml")
    return read_sources(ROOT / "schemas", ROOT, overlay.files).kinds


def _schema(kind: str) -> dict[str, Any]:
    crd = _generated().crds[kind]
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("kind", sorted(_generated().crds))
def test_every_generated_crd_is_structural(kind: str) -> None:
    assert check_crd(_generated().crds[kind]) == []


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"description": "x"}}}, "a: type is missing"),
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "a: $ref is not allowed"),
        ({"type": "object", "title": "T"}, "<root>: title is not allowed"),
        (
            {
                "type": "object",
                "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            },
            "a.anyOf[0]: may not set type",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "default": "4"}}},
            "not of type",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "enum": ["A"], "default": "B"}},
            },
            "is not one of",
        ),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "a single items schema"),
        (
            {
                "type": "object",
                "properties": {
                    "c": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "properties": {"type": {"type": "string"}}},
                    }
                },
            },
            "list-map key type must be required or defaulted",
        ),
    ],
)
def test_structural_check_catches_what_the_apiserver_rejects(
    schema: dict[str, Any], problem: str
) -> None:
    assert any(problem in p for p in check_schema(schema)), check_schema(schema)


def test_int_or_string_quantities_are_structural() -> None:
    resources = node_at(_schema("VirtualTargetClass"), "spec.scheduling.resources")
    assert resources is not None
    quantity = resources["properties"]["limits"]["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert check_schema(resources) == []


def _survives(doc: KindDoc, schema: dict[str, Any]) -> tuple[int, list[str]]:
    lost: list[str] = []
    for field in doc.fields:
        node = node_at(schema, field.path)
        if node is None:
            lost.append(f"{field.path}: missing")
            continue
        type_ok = (
            node.get("x-kubernetes-int-or-string") is True
            if field.type == "int-or-string"
            else node.get("type") == field.type
        )
        checks = {
            "type": type_ok,
            "enum": list(field.enum) == node.get("enum", []),
            "default": (not field.has_default) or node.get("default") == field.default,
            "description": field.description == node.get("description", ""),
            # Bounds the document states survive; the overlay may add bounds where it is silent.
            "pattern": field.pattern in (None, node.get("pattern")),
            "minLength": field.min_length in (None, node.get("minLength")),
            "maxLength": field.max_length in (None, node.get("maxLength")),
            "minimum": field.minimum in (None, node.get("minimum")),
        }
        lost.extend(f"{field.path}: {what}" for what, ok in checks.items() if not ok)
    return len(doc.fields) - len({p.split(":")[0] for p in lost}), lost


@pytest.mark.parametrize("doc", _docs(), ids=lambda d: d.kind)
def test_every_documented_field_survives_in_the_crd(doc: KindDoc) -> None:
    kept, lost = _survives(doc, _schema(doc.kind))
    print(f"{doc.kind.lower()}: {kept}/{len(doc.fields)} fields")
    assert lost == []


def test_required_fields_reach_the_schema() -> None:
    image = _schema("ClusterVirtualImage")
    assert "dataSource" in image["properties"]["spec"]["required"]
    assert "provisioner" in _schema("VirtualTargetClass")["properties"]["spec"]["required"]


@pytest.mark.parametrize("rule", [r for r in RULES if not r.apiserver_check], ids=lambda r: r.id)
def test_every_rule_is_a_cel_validation_at_its_scope(rule: Any) -> None:
    node = node_at(_schema(rule.kind), rule.scope)
    assert node is not None
    assert validation_entry(rule) in node["x-kubernetes-validations"]


@pytest.mark.parametrize("rule", [r for r in RULES if r.apiserver_check], ids=lambda r: r.id)
def test_a_rule_kube_apiserver_checks_itself_has_no_cel_repeating_it(rule: Any) -> None:
    # The one such check: a negative value at the scale subresource's specReplicasPath.
    crd = _generated().crds[rule.kind]["spec"]["versions"][0]
    path = crd["subresources"]["scale"]["specReplicasPath"]
    assert path == f".{rule.scope}.{rule.field}"
    assert rule.message == "should be a non-negative integer"  # the apiserver's words
    node = node_at(_schema(rule.kind), rule.scope)
    assert node is not None
    assert all(v["rule"] != rule.cel for v in node.get("x-kubernetes-validations", []))


def test_exporterset_subresources_columns_and_lists() -> None:
    version = _generated().crds["ExporterSet"]["spec"]["versions"][0]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.minReplicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Replicas",
        "Ready",
        "Available",
        "Leased",
        "Class",
        "Age",
    ]
    schema = _schema("ExporterSet")
    conditions = node_at(schema, "status.conditions")
    assert conditions is not None
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert node_at(schema, "spec.parameters") == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "Parameters are optional overrides deep-merged over the class parameters.",
    }
    labels = node_at(schema, "spec.template.metadata.labels")
    assert labels is not None and labels["additionalProperties"]["type"] == "string"
    assert node_at(schema, "spec.selector.matchExpressions[].operator") is not None


def test_free_form_only_where_the_documents_say_so() -> None:
    free: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            free.append(path)
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}" if path else name)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    for kind in ("VirtualTargetClass", "ExporterSet", "Exporter"):
        walk(_schema(kind), kind)
    assert sorted(free) == [
        "ExporterSet.spec.parameters",
        "ExporterSet.spec.template.spec.drivers[].config",
        "VirtualTargetClass.spec.parameters",
    ]


def test_committed_output_is_what_the_generator_produces() -> None:
    # The same comparison as `virtualtarget crds --check` in CI.
    assert stale_files(ROOT, _generated().files) == []


def test_generation_is_reproducible() -> None:
    assert generate(ROOT).files == _generated().files


def test_api_schema_serves_the_crd_schema_as_a_copy() -> None:
    assert openapi_schema("ExporterSet") == _schema("ExporterSet")
    openapi_schema("ExporterSet")["properties"].clear()
    assert openapi_schema("ExporterSet")["properties"]


def test_skipped_documents_are_reported() -> None:
    (notice,) = _generated().notices
    assert "VirtualMachineClass is documented only by examples" in notice


def test_overlay_typo_is_an_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "overlay.yaml").write_text("kinds:\n  ExporterSet:\n    shortname: [x]\n")
    with pytest.raises(OverlayError, match=r"kinds\.ExporterSet: unknown key 'shortname'"):
        load_overlay(tmp_path / "overlay.yaml")
