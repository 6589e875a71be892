"""Every rendered built-in object validates against the Kubernetes API schema.

The `kubernetes` client's models are generated from the apiserver's OpenAPI document and
forbid unknown fields, check types and required fields: a misspelt or misplaced field
in `deploy/` fails here instead of at `kubectl apply`.
"""

from __future__ import annotations

from typing import Any

import kubernetes.client.models as k8s
import pytest

from harness.deploy_render import OVERLAYS, render_overlay

# Kinds from other projects' CRDs: checked by their own tests (cert-manager's schema is
# not in the Kubernetes OpenAPI document).
FOREIGN_GROUPS = {"cert-manager.io"}


def model_for(obj: dict[str, Any]) -> type[Any]:
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    return getattr(k8s, f"{version.capitalize()}{obj['kind']}")  # type: ignore[no-any-return]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_validate_against_the_kubernetes_schema(overlay: str) -> None:
    checked = set()
    for obj in render_overlay(overlay):
        if obj["apiVersion"].split("/")[0] in FOREIGN_GROUPS:
            continue
        model_for(obj).model_validate(obj)
        checked.add(obj["kind"])
    assert {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ClusterRole",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
    } <= checked


def test_the_check_catches_a_misplaced_field() -> None:
    (deployment,) = [
        o
        for o in render_overlay("cert-manager")
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "virtualtarget-webhook"
    ]
    deployment["spec"]["template"]["spec"]["readOnlyRootFilesystem"] = (
        True  # belongs in a container
    )
    with pytest.raises(ValueError, match="readOnlyRootFilesystem"):
        model_for(deployment).model_validate(deployment)
