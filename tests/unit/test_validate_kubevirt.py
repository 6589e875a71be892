"""`virtualtarget validate` on VirtualMachineInstance manifests: checked against the
generated model, printed as given when they pass, each error naming file, object and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from virtualtarget.cli import main

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "kubevirt"


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


def test_vmis_and_served_kinds_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = tmp_path / "class.yaml"
    served.write_text(
        "apiVersion: virtualtarget.jumpstarter.dev/v1alpha1\nkind: VirtualTargetClass\n"
        "metadata: {name: qemu}\nspec: {provisioner: qemu.jumpstarter.dev}\n"
    )
    assert main(["validate", "-f", str(served), str(DATA / "vmi-masquerade.yaml")]) == 0
    out, err = capsys.readouterr()
    assert [o["kind"] for o in yaml.safe_load_all(out)] == [
        "VirtualTargetClass",
        "VirtualMachineInstance",
    ]
    assert "VirtualMachineInstance" not in err
