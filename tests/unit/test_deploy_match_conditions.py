"""The mutating webhooks' matchConditions call them exactly when they have work.

kube-apiserver fills the CRD's schema defaults before it calls a webhook, so behind it
the mutating webhook of our own kinds adds something only when a defaulted field is
still absent (or, for an ExporterSet, the template has no labels). Each condition must
name every default the schema declares, or a default added to the schema would never
reach an object through the webhook; and evaluated (cel-python) on the objects the
webhook would change, it must let the call through, and skip it otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import celpy
import pytest
import yaml

from harness.controlplane import REPO_ROOT
from harness.deploy_render import render_overlay
from webhook.admission import Admission
from webhook.defaulter import default_object
from webhook.schemas import crd_schema

KINDS = ("VirtualTargetClass", "ExporterSet")
EXAMPLES = {
    "VirtualTargetClass": "virtualtargetclass-qemu.yaml",
    "ExporterSet": "exporterset-qemu.yaml",
}


def condition(kind: str) -> str:
    hooks = [
        hook
        for obj in render_overlay("self-signed")
        if obj["kind"] == "MutatingWebhookConfiguration"
        for hook in obj["webhooks"]
        if hook["rules"][0]["resources"][0].lower().startswith(kind.lower())
    ]
    (hook,) = hooks
    (match,) = hook["matchConditions"]
    expression: str = match["expression"]
    return expression


def defaulted_paths(node: Any, path: str = "object") -> Iterator[str]:
    """`object.spec.x` for every property of the schema that carries a default."""
    for name, child in (node.get("properties") or {}).items():
        here = f"{path}.{name}"
        if "default" in child:
            yield here
        yield from defaulted_paths(child, here)


def calls(kind: str, obj: dict[str, Any]) -> bool:
    env = celpy.Environment()
    result = env.program(env.compile(condition(kind))).evaluate({"object": celpy.json_to_cel(obj)})
    return bool(result)


def example(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / EXAMPLES[kind]).read_text())
    return loaded


def apiserver_defaulted(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the apiserver hands it to a webhook: schema defaults filled."""
    defaulted, _ = default_object(kind, obj, crd_schema)
    if kind == "ExporterSet":  # the one default outside the schema is the webhook's
        defaulted["spec"]["template"]["metadata"].setdefault("labels", {"x": "y"})
    return defaulted


@pytest.mark.parametrize("kind", KINDS)
def test_the_condition_names_every_schema_default(kind: str) -> None:
    spec = crd_schema(kind)["properties"]["spec"]
    paths = list(defaulted_paths(spec, "object.spec"))
    assert paths, kind
    for path in paths:
        assert f"has({path})" in condition(kind), path


@pytest.mark.parametrize("kind", KINDS)
def test_skipped_once_the_apiserver_has_defaulted_and_called_when_a_default_is_missing(
    kind: str,
) -> None:
    obj = apiserver_defaulted(kind, example(kind))
    assert not calls(kind, obj)
    for path in defaulted_paths(crd_schema(kind)["properties"]["spec"], "spec"):
        parent_path, name = path.rsplit(".", 1)
        missing = copy.deepcopy(obj)
        parent = missing
        for part in parent_path.split("."):
            parent = parent.setdefault(part, {})
        parent.pop(name, None)
        assert calls(kind, missing), path


def test_an_exporterset_template_without_labels_calls_the_webhook() -> None:
    obj = apiserver_defaulted("ExporterSet", example("ExporterSet"))
    for template in ({}, {"metadata": {}}, {"metadata": {"labels": {}}}):
        without = copy.deepcopy(obj)
        without["spec"]["template"] = template
        assert calls("ExporterSet", without), template
    del obj["spec"]["template"]
    assert calls("ExporterSet", obj)


def test_what_the_condition_skips_the_webhook_would_not_change() -> None:
    for kind in KINDS:
        obj = apiserver_defaulted(kind, example(kind))
        assert not calls(kind, obj)
        _, edits = default_object(kind, obj, Admission(crd_schema).schema_source)
        assert edits == [], kind
