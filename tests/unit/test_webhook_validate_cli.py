"""`virtualtarget validate`: offline defaulting and validation of manifests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from virtualtarget.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLASS_EXAMPLE = EXAMPLES / "virtualtargetclass-qemu.yaml"


def test_valid_examples_pass_and_print_defaulted_objects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "-f", *map(str, sorted(EXAMPLES.glob("*.yaml")))]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    exporter = next(o for o in printed if o["kind"] == "Exporter")
    assert "enabled" in exporter["spec"]


@pytest.mark.parametrize(
    "invalid", sorted((EXAMPLES / "invalid").glob("*.yaml")), ids=lambda p: p.stem
)
def test_each_invalid_example_is_denied_naming_file_and_field(
    invalid: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", "-q", "-f", str(CLASS_EXAMPLE), str(invalid)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{invalid}: " in err and "spec." in err


def test_defaults_are_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "set.yaml"
    manifest.write_text(
        "apiVersion: virtualtarget.jumpstarter.dev/v1alpha1\nkind: ExporterSet\n"
        "metadata: {name: p}\nspec:\n  virtualTargetClassName: c\n"
        "  selector: {matchLabels: {pool: p}}\n"
    )
    assert main(["validate", "-f", str(manifest)]) == 0
    out = capsys.readouterr()
    spec = yaml.safe_load(out.out)["spec"]
    assert spec["maxReplicas"] == 4 and spec["scaleDownCooldown"] == "5m"
    assert spec["template"] == {"metadata": {"labels": {"pool": "p"}}}
    assert 'VirtualTargetClass "c" not found' in out.err


def test_unreadable_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(tmp_path / "missing.yaml")]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    assert main(["validate", "-f", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("virtualtarget validate: ") for line in err)
    assert err[0].startswith(f"virtualtarget validate: {tmp_path / 'missing.yaml'}: ")
    assert err[1].startswith(f"virtualtarget validate: {bad}:2: not valid YAML: ")


def test_denied_manifests_print_no_defaulted_objects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    invalid = EXAMPLES / "invalid" / "exporterset-min-replicas-above-max.yaml"
    assert main(["validate", "-f", str(CLASS_EXAMPLE), "-f", str(invalid)]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        f"{invalid}: ExporterSet/exporterset-min-replicas-above-max: spec.minReplicas: "
        "Invalid value: 5: must be less than or equal to spec.maxReplicas (4)",
        "1 object(s) denied",
    ]


def test_unknown_parameters_are_printed_as_warnings_and_admitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    klass = yaml.safe_load(CLASS_EXAMPLE.read_text())
    klass["spec"]["parameters"]["colour"] = "red"
    exporter_set = yaml.safe_load((EXAMPLES / "exporterset-qemu.yaml").read_text())
    exporter_set["spec"]["parameters"]["resources"]["gpus"] = 1
    manifest = tmp_path / "pool.yaml"
    manifest.write_text(yaml.safe_dump_all([klass, exporter_set]))
    assert main(["validate", "-q", "-f", str(manifest)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"{manifest}: VirtualTargetClass/qemu-x86: warning: spec.parameters.colour: unknown "
        "parameter, passed through (known: arch, machineType, firmware, resources, layout)",
        f"{manifest}: ExporterSet/fedora-x86: warning: spec.parameters.resources.gpus: unknown "
        "parameter, passed through (known: cpu, memory, storage)",
    ]
