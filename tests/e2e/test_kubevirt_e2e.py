"""The VirtualMachineInstance CRD generated from KubeVirt's page and reference meets
kube-apiserver: established, VMIs shaped like KubeVirt's documented examples are stored
as sent (nothing pruned), and a wrong type or an unknown enum value is refused at its path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.controlplane import REPO_ROOT, ControlPlane

DATA = REPO_ROOT / "tests" / "data" / "kubevirt"
CRD = "virtualmachineinstances.kubevirt.io"


def _vmi(path: Path, namespace: str) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load(path.read_text())
    vmi["metadata"]["namespace"] = namespace
    return vmi


def test_vmi_crd_is_established_with_kubevirts_names(control_plane: ControlPlane) -> None:
    crd = json.loads(control_plane.kubectl("get", "crd", CRD, "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert "NonStructuralSchema" not in conditions
    names = crd["status"]["acceptedNames"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (
        "VirtualMachineInstance",
        "virtualmachineinstances",
        ["vmi", "vmis"],
    )
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


@pytest.mark.parametrize("path", sorted(DATA.glob("*.yaml")), ids=lambda p: p.stem)
def test_documented_vmi_is_stored_as_sent(
    control_plane: ControlPlane, namespace: str, path: Path
) -> None:
    vmi = _vmi(path, namespace)
    control_plane.kubectl("create", "-f", "-", input=json.dumps(vmi))
    name = vmi["metadata"]["name"]
    stored = json.loads(
        control_plane.kubectl("get", "vmi", name, "-n", namespace, "-o", "json").stdout
    )
    assert stored["spec"] == vmi["spec"]  # every field known to the schema: none pruned


@pytest.mark.parametrize("path", sorted((DATA / "invalid").glob("*.yaml")), ids=lambda p: p.stem)
def test_wrong_vmi_is_refused_at_its_path(
    control_plane: ControlPlane, namespace: str, path: Path
) -> None:
    # The first line names the field and how the apiserver words the refusal.
    expected = path.read_text().splitlines()[0].removeprefix("# rejected at: ")
    vmi = _vmi(path, namespace)
    result = control_plane.kubectl("create", "-f", "-", input=json.dumps(vmi), check=False)
    assert result.returncode != 0, f"{path.name} was accepted"
    name = vmi["metadata"]["name"]
    prefix = f'The VirtualMachineInstance "{name}" is invalid: {expected}'
    assert result.stderr.startswith(prefix), result.stderr
