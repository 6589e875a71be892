"""Defaulting: schema defaults as kube-apiserver applies them, template labels, the patch."""

from __future__ import annotations

import base64
import copy
import json

from tests.unit.test_webhook_support import a_class, a_set, an_exporter, apply_patch, schema_source
from webhook.defaulter import default_object
from webhook.patch import Edit, encode_patch, escape_token, pointer, to_operations


def patch_for(kind: str, obj: dict) -> list[dict]:
    _, edits = default_object(kind, obj, schema_source)
    return to_operations(edits)


def test_exporterset_defaults_fill_every_absent_count_and_policy() -> None:
    obj = a_set()
    ops = patch_for("ExporterSet", obj)
    assert {op["path"]: op["value"] for op in ops} == {
        "/spec/maxReplicas": 4,
        "/spec/minAvailableReplicas": 0,
        "/spec/minReplicas": 0,
        "/spec/recycleStrategy": "ExitAndReplace",
        "/spec/scaleDownCooldown": "5m",
    }
    assert all(op["op"] == "add" for op in ops)


def test_present_fields_are_never_overwritten() -> None:
    obj = a_set(
        maxReplicas=0, minReplicas=2, scaleDownCooldown="1h", recycleStrategy="InPlaceReuse"
    )
    paths = {op["path"] for op in patch_for("ExporterSet", obj)}
    assert paths == {"/spec/minAvailableReplicas"}


def test_class_defaults_and_ca_bundle_key_only_with_a_reference() -> None:
    without = patch_for("VirtualTargetClass", a_class())
    assert {op["path"] for op in without} == {"/spec/bindingMode", "/spec/reclaimPolicy"}
    with_ref = patch_for("VirtualTargetClass", a_class(caBundleConfigMapRef={"name": "corp-ca"}))
    assert {
        "op": "add",
        "path": "/spec/caBundleConfigMapRef/key",
        "value": "ca-bundle.crt",
    } in with_ref


def test_no_defaults_under_a_missing_parent() -> None:
    obj = {"apiVersion": "jumpstarter.dev/v1alpha1", "kind": "Exporter", "metadata": {"name": "e"}}
    assert patch_for("Exporter", obj) == []
    assert patch_for("Exporter", an_exporter()) == [
        {"op": "add", "path": "/spec/enabled", "value": True}
    ]
    assert patch_for("Exporter", an_exporter(enabled=False)) == []


def test_null_field_with_a_default_is_replaced() -> None:
    ops = patch_for("Exporter", an_exporter(enabled=None))
    assert ops == [{"op": "replace", "path": "/spec/enabled", "value": True}]
    assert apply_patch(an_exporter(enabled=None), ops)["spec"]["enabled"] is True


def test_template_labels_come_from_match_labels_when_absent() -> None:
    obj = a_set()
    del obj["spec"]["template"]["metadata"]["labels"]
    ops = patch_for("ExporterSet", obj)
    assert {"op": "add", "path": "/spec/template/metadata/labels", "value": {"pool": "a"}} in ops


def test_template_labels_add_the_missing_parents_whole() -> None:
    obj = a_set()
    del obj["spec"]["template"]
    ops = patch_for("ExporterSet", obj)
    assert {
        "op": "add",
        "path": "/spec/template",
        "value": {"metadata": {"labels": {"pool": "a"}}},
    } in ops
    obj = a_set(template={"spec": {}})
    ops = patch_for("ExporterSet", obj)
    assert {
        "op": "add",
        "path": "/spec/template/metadata",
        "value": {"labels": {"pool": "a"}},
    } in ops
    assert apply_patch(obj, ops)["spec"]["template"]["metadata"]["labels"] == {"pool": "a"}


def test_template_labels_that_exist_are_kept() -> None:
    obj = a_set(template={"metadata": {"labels": {"other": "x"}}})
    assert not any("template" in op["path"] for op in patch_for("ExporterSet", obj))


def test_unknown_fields_survive_and_the_patch_applies_to_the_object_as_sent() -> None:
    obj = a_set()
    obj["spec"]["futureField"] = {"nested": [1, 2]}
    obj["metadata"]["annotations"] = {"example.com/x": "y"}
    obj["status"] = {"whatever": True}
    sent = copy.deepcopy(obj)
    defaulted, edits = default_object("ExporterSet", obj, schema_source)
    assert obj == sent, "the input is not modified"
    assert apply_patch(sent, to_operations(edits)) == defaulted
    assert defaulted["spec"]["futureField"] == {"nested": [1, 2]}
    assert defaulted["status"] == {"whatever": True}


def test_second_pass_yields_an_empty_patch() -> None:
    for kind, obj in (
        ("ExporterSet", a_set(template={})),
        ("VirtualTargetClass", a_class(caBundleConfigMapRef={"name": "ca"})),
        ("Exporter", an_exporter()),
    ):
        defaulted, edits = default_object(kind, obj, schema_source)
        assert edits
        assert default_object(kind, defaulted, schema_source)[1] == []


def test_defaults_inside_list_items_and_new_objects() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "mode": {"type": "string", "default": "on"},
                        "inner": {
                            "type": "object",
                            "default": {},
                            "properties": {"x": {"type": "integer", "default": 1}},
                        },
                    },
                },
            }
        },
    }
    obj = {"items": [{"mode": "off"}, {}]}
    _, edits = default_object("Other", obj, lambda _kind: schema)
    assert to_operations(edits) == [
        {"op": "add", "path": "/items/0/inner", "value": {"x": 1}},
        {"op": "add", "path": "/items/1/mode", "value": "on"},
        {"op": "add", "path": "/items/1/inner", "value": {"x": 1}},
    ]


def test_json_pointer_escaping() -> None:
    assert escape_token("a/b~c") == "a~1b~0c"
    assert escape_token("~1") == "~01"
    assert (
        pointer(("metadata", "labels", "example.com/pool")) == "/metadata/labels/example.com~1pool"
    )
    assert to_operations([Edit(("a", 0), 1)]) == [{"op": "add", "path": "/a/0", "value": 1}]


def test_label_keys_with_slashes_are_escaped_in_the_patch() -> None:
    obj = a_set(selector={"matchLabels": {"example.com/pool": "a"}}, template={"metadata": {}})
    ops = patch_for("ExporterSet", obj)
    label_op = next(op for op in ops if "template" in op["path"])
    assert label_op["path"] == "/spec/template/metadata/labels"
    defaulted = apply_patch(obj, ops)
    assert defaulted["spec"]["template"]["metadata"]["labels"] == {"example.com/pool": "a"}
    escaped = default_object(
        "Other",
        {"m": {"a/b": {}}},
        lambda _k: {
            "type": "object",
            "properties": {
                "m": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"d": {"type": "string", "default": "v"}},
                    },
                }
            },
        },
    )[1]
    assert to_operations(escaped) == [{"op": "add", "path": "/m/a~1b/d", "value": "v"}]


def test_encoded_patch_keeps_equal_scalars_of_different_types_apart() -> None:
    # 1, 1.0 and True are one dict key; the encoded operations are cached per scalar.
    edits = [
        Edit(("a",), 1),
        Edit(("a",), True),
        Edit(("a",), 1.0),
        Edit(("a",), None, replace=True),
        Edit(("a", "b/c"), {"x": [1]}),
    ]
    for _ in range(2):
        patch = encode_patch(edits)
        assert patch is not None
        assert json.loads(base64.b64decode(patch)) == to_operations(edits)
        assert [type(op["value"]) for op in json.loads(base64.b64decode(patch))] == [
            int,
            bool,
            float,
            type(None),
            dict,
        ]
    assert encode_patch([]) is None
