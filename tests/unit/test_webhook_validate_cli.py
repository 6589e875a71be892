"""`virtualtarget validate`: offline defaulting and validation of manifests."""

from __future__ import annotations

import copy
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
        "parameter, passed through "
        "(known: arch, machineType, firmware, resources, storage, …)",
        f"{manifest}: ExporterSet/fedora-x86: warning: spec.parameters.resources.gpus: unknown "
        "parameter, passed through (known: cpu, memory, storage)",
    ]


def test_each_bad_storage_value_is_reported_and_the_old_key_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`parameters.storage`: a number for the size, a percentage that cannot be read, an
    access mode Kubernetes does not know and a StorageClass name that is no object name,
    each named; a set still sizing the disk with `resources.storage` gets a warning."""
    klass = yaml.safe_load(CLASS_EXAMPLE.read_text())
    bad = copy.deepcopy(klass)
    bad["metadata"]["name"] = "bad-disk"
    bad["spec"]["parameters"]["storage"] = {
        "size": 20,
        "fsOverhead": "ten%",
        "accessModes": ["ReadWriteEverywhere"],
        "storageClassName": "Local_Disks",
    }
    exporter_set = yaml.safe_load((EXAMPLES / "exporterset-qemu.yaml").read_text())
    exporter_set["spec"]["parameters"]["resources"]["storage"] = "30Gi"
    manifest = tmp_path / "pool.yaml"
    manifest.write_text(yaml.safe_dump_all([bad, klass, exporter_set]))
    assert main(["validate", "-q", "-f", str(manifest)]) == 1
    where = f"{manifest}: VirtualTargetClass/bad-disk: spec.parameters.storage"
    assert capsys.readouterr().err.splitlines() == [
        f'{where}.size: Invalid value: 20: must be a string such as "10Gi", not a number '
        "(qemu.jumpstarter.dev)",
        f'{where}.fsOverhead: Invalid value: "ten%": must be a whole percentage such as "10%" '
        "(qemu.jumpstarter.dev)",
        f'{where}.storageClassName: Invalid value: "Local_Disks": a lowercase RFC 1123 '
        "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (qemu.jumpstarter.dev)",
        f'{where}.accessModes[0]: Invalid value: "ReadWriteEverywhere": Input should be '
        "'ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany' or 'ReadWriteOncePod' "
        "(qemu.jumpstarter.dev)",
        f"{manifest}: ExporterSet/fedora-x86: warning: spec.parameters.resources.storage: "
        "deprecated: use spec.parameters.storage.size, which wins where both are set",
        "1 object(s) denied",
    ]
