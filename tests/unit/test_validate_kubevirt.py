"""`virtualtarget validate` on VirtualMachineInstance manifests: checked against the
generated model, printed as given when they pass, each error naming file, object and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from virtualtarget.cli import main

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "kubevirt"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_documented_vmis_pass_and_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(DATA.glob("*.yaml"))
    assert main(["validate", "-f", *map(str, files)]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == [yaml.safe_load(path.read_text()) for path in files]


def test_wrong_vmis_are_denied_naming_file_object_and_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = sorted((DATA / "invalid").glob("*.yaml"))
    assert main(["validate", "-q", "-f", *map(str, files)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"{files[0]}: VirtualMachineInstance/vmi-cores-not-an-integer: spec.domain.cpu.cores: "
        'Invalid value: "two": must be of type integer',
        f"{files[1]}: VirtualMachineInstance/vmi-unknown-dns-policy: spec.dnsPolicy: "
        'Unsupported value: "ClusterLast": supported values: "ClusterFirst", '
        '"ClusterFirstWithHostNet", "Default", "None"',
        "2 object(s) denied",
    ]


def test_vmis_and_served_kinds_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    files = [EXAMPLES / "virtualtargetclass-qemu.yaml", DATA / "vmi-masquerade.yaml"]
    assert main(["validate", "-q", "-f", *map(str, files)]) == 0
    assert capsys.readouterr().err == ""
