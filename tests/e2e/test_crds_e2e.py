"""The generated CRDs meet kube-apiserver: accepted, defaulted, and guarded by CEL alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.rules import RULES
from api.schema import openapi_schema
from virtualtarget.controlplane import REPO_ROOT, ControlPlane, crd_files

EXAMPLES = REPO_ROOT / "examples"
RULES_BY_ID = {rule.id: rule for rule in RULES}


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


def in_namespace(path: Path, namespace: str) -> str:
    """The manifests of `path` moved into `namespace`, as a YAML stream for kubectl."""
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for document in documents:
        document["metadata"]["namespace"] = namespace
    return yaml.safe_dump_all(documents)


def _invalid_examples() -> list[Path]:
    return sorted((EXAMPLES / "invalid").glob("*.yaml"))


def _rule_of(path: Path) -> str:
    """The rule id on the example's `# violates: <rule id>` line."""
    first = path.read_text().splitlines()[0]
    return first.removeprefix("# violates:").strip()


@pytest.mark.parametrize(
    "path",
    [p for p in _invalid_examples() if _rule_of(p) in RULES_BY_ID],
    ids=lambda p: p.stem,
)
def test_cel_rejects_invalid_example_without_webhook(
    control_plane: ControlPlane, namespace: str, path: Path
) -> None:
    rule = RULES_BY_ID[_rule_of(path)]
    result = control_plane.kubectl(
        "apply", "-f", "-", input=in_namespace(path, namespace), check=False
    )
    assert result.returncode != 0, f"{path.name} was accepted: {result.stdout}"
    name = next(d for d in yaml.safe_load_all(path.read_text()) if d)["metadata"]["name"]
    assert result.stderr.startswith(f'The {rule.kind} "{name}" is invalid: '), result.stderr
    assert f"{rule.error_type.text}: " in result.stderr
    assert rule.message in result.stderr
    # One message for the one wrong field (several would come as a bracketed list).
    assert not result.stderr.split(" is invalid: ", 1)[1].startswith("["), result.stderr


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_valid_example_accepted(control_plane: ControlPlane, namespace: str, path: Path) -> None:
    control_plane.kubectl("apply", "-f", "-", input=in_namespace(path, namespace))
