"""The loopback control-plane harness says what is missing and what to run, in one line,
and applies the same CRDs once where asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane, ControlPlaneError, crd_files, running_control_plane
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


def test_crds_applied_last_are_not_applied_again_unless_asked(tmp_path: Path) -> None:
    """`apply_crds(again=False)` skips the files this plane applied last (each test's
    Jumpstarter asks for its release's); other files applied between make it apply again."""
    calls: list[tuple[str, ...]] = []

    class Recorded(ControlPlane):
        def kubectl(self, *args: str, **_: object) -> Any:
            calls.append(args[:1])

    plane = Recorded(workdir=tmp_path, port=1, token="t", binaries={})
    release, ours = [tmp_path / "release.yaml"], [tmp_path / "ours.yaml"]
    plane.apply_crds(release, again=False)
    plane.apply_crds(release, again=False)
    assert calls == [("apply",), ("wait",)]
    plane.install_crds(ours)
    plane.apply_crds(release, again=False)
    plane.apply_crds(release)
    assert calls == [("apply",), ("wait",)] * 4
