"""The generated CRDs meet kube-apiserver: accepted, defaulted, and guarded by CEL alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.schema import openapi_schema
from harness.controlplane import ControlPlane, crd_files
from tests.e2e.examples import EXAMPLES, assert_refused_by_its_rule, in_namespace, rule_examples


def _crd_name(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["metadata"]["name"])


@pytest.mark.parametrize("path", crd_files(), ids=lambda p: p.name)
def test_crd_is_established_and_structural(control_plane: ControlPlane, path: Path) -> None:
    out = control_plane.kubectl("get", "crd", _crd_name(path), "-o", "json").stdout
    conditions = {c["type"]: c["status"] for c in json.loads(out)["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert conditions.get("NamesAccepted") == "True"
    assert "NonStructuralSchema" not in conditions


def _schema_defaults(schema: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Defaults of the direct children of `schema`, keyed by field path."""
    return {
        f"{prefix}{name}": child["default"]
        for name, child in schema.get("properties", {}).items()
        if "default" in child
    }


def test_schema_defaults_applied_by_apiserver(control_plane: ControlPlane, namespace: str) -> None:
    exporter_set = {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "ExporterSet",
        "metadata": {"name": "defaults", "namespace": namespace},
        "spec": {
            "virtualTargetClassName": "qemu",
            "selector": {"matchLabels": {"pool": "defaults"}},
            "template": {"metadata": {"labels": {"pool": "defaults"}}},
        },
    }
    control_plane.kubectl("create", "-f", "-", input=json.dumps(exporter_set))
    stored = json.loads(
        control_plane.kubectl(
            "get", "exporterset", "defaults", "-n", namespace, "-o", "json"
        ).stdout
    )
    expected = _schema_defaults(openapi_schema("ExporterSet")["properties"]["spec"])
    assert expected, "the documented schema should carry ExporterSet defaults"
    for name, value in expected.items():
        assert stored["spec"][name] == value, name


@pytest.mark.parametrize("path", rule_examples(), ids=lambda p: p.stem)
def test_cel_rejects_invalid_example_without_webhook(
    control_plane: ControlPlane, namespace: str, path: Path
) -> None:
    result = control_plane.kubectl(
        "apply", "-f", "-", input=in_namespace(path, namespace), check=False
    )
    assert_refused_by_its_rule(path, result)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_valid_example_accepted(control_plane: ControlPlane, namespace: str, path: Path) -> None:
    control_plane.kubectl("apply", "-f", "-", input=in_namespace(path, namespace))
