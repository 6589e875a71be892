"""The loopback control-plane harness says what is missing and what to run, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.controlplane import ControlPlaneError, crd_files, running_control_plane
from harness.dev import main


def test_missing_binaries_name_the_command_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIRTUALTARGET_BIN_DIR", str(tmp_path))
    with pytest.raises(ControlPlaneError) as caught, running_control_plane():
        pass
    assert str(caught.value) == (
        f"control plane: etcd, kube-apiserver, kubectl not found in {tmp_path}; "
        "run `make control-plane` (builds them from Go modules)"
    )


def test_dev_reports_missing_binaries_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIRTUALTARGET_BIN_DIR", str(tmp_path / "bin"))
    assert main(["--workdir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("harness.dev: control plane: etcd, kube-apiserver, kubectl")
    assert len(err.strip().splitlines()) == 1


def test_crd_files_are_the_generated_ones() -> None:
    names = {path.name for path in crd_files()}
    assert "virtualtarget.jumpstarter.dev_exportersets.yaml" in names
    assert "kustomization.yaml" not in names
    assert any(path.parent.name == "deckhouse" for path in crd_files())
