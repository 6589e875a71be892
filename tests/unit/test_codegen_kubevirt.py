"""KubeVirt's VirtualMachineInstance page read against KubeVirt's published definitions:
every paragraph placed, the figures `make crds` prints, the descriptions on the right
fields, and the generated model judging VMIs shaped like KubeVirt's documented examples."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.modelcheck import model_errors
from api.models.kubevirt.virtualmachineinstance import VirtualMachineInstance
from codegen.fieldtree import KindDoc
from codegen.layout_prose import read_page
from codegen.overlay import load_overlay
from codegen.sources import read_sources
from virtualtarget.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = "schemas/kubevirt-virtualmachineinstance.txt"
DATA = ROOT / "tests" / "data" / "kubevirt"


@cache
def _doc() -> KindDoc:
    overlay = load_overlay(ROOT / "schemas" / "overlay.yaml")
    (doc,) = (d for d in read_sources(ROOT / "schemas", ROOT, overlay.files).kinds if d.coverage)
    return doc


def _description(path: str) -> str:
    return next(f.description for f in _doc().fields if f.path == path)


def test_every_paragraph_of_the_page_is_placed() -> None:
    coverage = _doc().coverage
    assert coverage is not None
    assert coverage.paragraphs == len(read_page((ROOT / PAGE).read_text(), PAGE).paragraphs)
    assert coverage.paragraphs == 528
    assert (coverage.described, coverage.fields) == (514, 714)
    assert coverage.abridged == (
        "spec.livenessProbe.guestAgentPing",
        "spec.readinessProbe.guestAgentPing",
    )
    assert coverage.cuts == ()  # no definition of the reference contains itself


def test_make_crds_reports_the_page_as_a_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--root", str(ROOT), "--check"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"crds: {PAGE}: VirtualMachineInstance: 528/528 paragraphs placed, "
        "514/714 reference fields described"
    ]
    assert "kubevirt" not in err  # no longer skipped


def test_descriptions_land_on_the_fields_they_describe() -> None:
    assert _description("spec.subdomain").startswith(
        'If specified, the fully qualified vmi hostname will be "...svc.".'
    )
    assert _description("spec.evictionStrategy").startswith(
        "EvictionStrategy describes the strategy to follow when a node drain occurs. The "
        'possible options are:\n\n• "None": No action will be taken'
    )
    assert _description("spec.livenessProbe.guestAgentPing") == (
        "GuestAgentPing contacts the qemu-guest-agent for availability checks."
    )
    # One text, seven fields: each paragraph goes where its position on the page fits.
    referents = [
        (f.path, f.line) for f in _doc().fields if f.description.startswith("Name of the referent.")
    ]
    assert referents == [
        ("spec.volumes[].cloudInitConfigDrive.networkDataSecretRef.name", 958),
        ("spec.volumes[].cloudInitConfigDrive.secretRef.name", 960),
        ("spec.volumes[].cloudInitNoCloud.networkDataSecretRef.name", 974),
        ("spec.volumes[].cloudInitNoCloud.secretRef.name", 976),
        ("spec.volumes[].configMap.name", 978),
        ("spec.volumes[].sysprep.configMap.name", 1058),
        ("spec.volumes[].sysprep.secret.name", 1060),
    ]


def test_reference_fields_the_page_does_not_describe_are_listed_in_the_docs() -> None:
    coverage = _doc().coverage
    assert coverage is not None
    docs = (ROOT / "docs" / "reference" / "kubevirt" / "virtualmachineinstance.md").read_text()
    assert "### Reference fields the page does not describe (200)" in docs
    for path, type_ in coverage.undescribed:
        assert f"| `{path}` | {type_} |" in docs
    assert ("status.phase", "string") in coverage.undescribed  # the page stops at activePods


def test_the_crd_is_not_part_of_the_install() -> None:
    kustomization = yaml.safe_load((ROOT / "crds" / "kustomization.yaml").read_text())
    assert not any("kubevirt" in resource for resource in kustomization["resources"])
    assert (ROOT / "crds" / "kubevirt" / "kubevirt.io_virtualmachineinstances.yaml").is_file()


def _manifest(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


@pytest.mark.parametrize("path", sorted(DATA.glob("*.yaml")), ids=lambda p: p.stem)
def test_documented_vmis_fit_the_model(path: Path) -> None:
    assert model_errors(VirtualMachineInstance, _manifest(path)) == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "vmi-cores-not-an-integer.yaml",
            'spec.domain.cpu.cores: Invalid value: "two": must be of type integer',
        ),
        (
            "vmi-unknown-dns-policy.yaml",
            'spec.dnsPolicy: Unsupported value: "ClusterLast": supported values: '
            '"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"',
        ),
    ],
)
def test_wrong_vmis_fail_the_model_at_their_path(path: str, expected: str) -> None:
    errors = model_errors(VirtualMachineInstance, _manifest(DATA / "invalid" / path))
    assert [str(e) for e in errors] == [expected]


def test_model_errors_name_every_field_as_the_apiserver_would() -> None:
    vmi = _manifest(DATA / "vmi-resources.yaml")
    vmi["spec"]["domain"]["resources"]["requests"] = {"memory": True, "cpu": "1 core"}
    vmi["spec"]["domain"]["cpu"]["cores"] = "2"  # strict: no coercion from a string
    vmi["spec"]["networks"] = [{"pod": {}}]
    assert [str(e) for e in model_errors(VirtualMachineInstance, vmi)] == [
        'spec.domain.cpu.cores: Invalid value: "2": must be of type integer',
        "spec.domain.resources.requests.memory: Invalid value: true: must be of type "
        "integer or string",
        'spec.domain.resources.requests.cpu: Invalid value: "1 core": should match '
        r"'^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
        r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'",
        "spec.networks[0].name: Required value",
    ]
