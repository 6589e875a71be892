"""The `kubevirt.jumpstarter.dev` class and set of Jumpstarter's pull request #927's guide
through kube-apiserver and the webhook registered from the rendered deploy manifests:
admitted as the guide writes them, and refused, naming the field, where one is broken.
The full text kubectl prints is asserted."""

from __future__ import annotations

import base64
import copy
from typing import Any

from harness.controlplane import ControlPlane
from harness.stack import WebhookServer
from tests.e2e.objects import get_json, try_apply
from tests.kubevirt_source import guide_documents


def _in(namespace: str) -> list[dict[str, Any]]:
    documents = guide_documents()
    for document in documents:
        document["metadata"]["namespace"] = namespace
    return documents


def test_the_guides_classes_and_set_are_admitted_as_written(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    basic, full, pool = _in(namespace)
    # The guide has one make the credentials Secret first; admission reads none, so none
    # is made here.
    result = try_apply(control_plane, basic, full, pool)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    stored = get_json(control_plane, "virtualtargetclass", "kubevirt-full", "-n", namespace)
    assert stored["spec"]["parameters"] == full["spec"]["parameters"]
    assert stored["spec"]["credentialsSecretRef"] == {"name": "kubevirt-credentials"}


def test_a_broken_class_or_set_is_refused_naming_the_field(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    basic, full, pool = _in(namespace)
    no_secret = copy.deepcopy(basic)
    del no_secret["spec"]["credentialsSecretRef"]
    no_secret["spec"]["parameters"]["sshAccess"] = "Public"
    result = try_apply(control_plane, no_secret)
    assert result.returncode == 1
    assert result.stderr == (
        'The VirtualTargetClass "kubevirt-basic" is invalid: \n'
        "* spec.parameters.sshAccess: Invalid value: \"Public\": Input should be '', "
        "'NodePort' or 'LoadBalancer' (kubevirt.jumpstarter.dev)\n"
        "* spec.credentialsSecretRef.name: Required value: kubevirt.jumpstarter.dev reaches "
        "the target cluster with the kubeconfig in this Secret's key `kubeconfig`\n"
    )
    # A class that leaves the namespace to its sets: a warning; a set that gives none: refused.
    del full["spec"]["parameters"]["namespace"]
    result = try_apply(control_plane, full)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "Warning: spec.parameters.namespace: not set by the class: each ExporterSet must set it\n"
    )
    result = try_apply(control_plane, pool)
    assert result.returncode == 1
    assert "spec.parameters.namespace: Required value: the target cluster's namespace for " in (
        result.stderr
    )
    given = copy.deepcopy(pool)
    given["spec"]["parameters"] = {"namespace": "my-vms"}
    result = try_apply(control_plane, given)
    assert result.returncode == 0, result.stderr


def test_a_class_whose_secret_is_missing_or_keyless_is_admitted_without_a_word(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    """The webhook reads no Secret: what the class's Secret holds is the reconciler's to
    report (`Degraded` `TargetFailed`: tests/e2e/test_kubevirt_pool_e2e.py)."""
    basic, full, _ = _in(namespace)
    result = try_apply(control_plane, basic)
    assert (result.returncode, result.stderr) == (0, "")
    keyless = {"name": "kubevirt-credentials", "namespace": namespace}
    data = {"token": base64.b64encode(b"x").decode()}
    try_apply(
        control_plane, {"apiVersion": "v1", "kind": "Secret", "metadata": keyless, "data": data}
    )
    result = try_apply(control_plane, full)
    assert (result.returncode, result.stderr) == (0, "")
