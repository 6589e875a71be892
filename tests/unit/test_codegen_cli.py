"""`virtualtarget crds` for a person: one clear line on error, `--check` fails when stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from virtualtarget.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    return tmp_path


def test_malformed_document_is_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path)
    exporter = root / "schemas" / "exporter.txt"
    exporter.write_text(exporter.read_text().replace("spec.enabled\tboolean", "spec.enabled\tbool"))
    assert main(["crds", "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "crds: schemas/exporter.txt:10: expected a type (string, integer, number, boolean, "
        "object, array) or enum, found 'bool'"
    )
    assert not (root / "crds").exists()  # nothing is written unless everything succeeded


def test_write_then_check_then_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path)
    assert main(["crds", "--root", str(root)]) == 0
    assert "0 unchanged" in capsys.readouterr().out
    assert main(["crds", "--root", str(root), "--check"]) == 0
    crd = root / "crds" / "virtualtarget.jumpstarter.dev_exportersets.yaml"
    crd.write_text(crd.read_text() + "# edited by hand\n")
    assert main(["crds", "--root", str(root), "--check"]) == 1
    assert "crds/virtualtarget.jumpstarter.dev_exportersets.yaml differs" in capsys.readouterr().err


def test_a_paragraph_the_reference_cannot_place_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path)
    page = root / "schemas" / "kubevirt-virtualmachineinstance.txt"
    page.write_text(page.read_text().replace("List of networks that", "List of nets that"))
    assert main(["crds", "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "crds: schemas/kubevirt-virtualmachineinstance.txt:36: expected a reference field that "
        'the paragraph "List of nets that can be attached to a vm\'s virtual interfa…" '
        "describes, in the page's order after spec.livenessProbe; found none (nearest: "
        "spec.networks (92% alike), spec.volumes (50% alike), "
        "spec.domain.devices.interfaces[].ports (45% alike))"
    )


def test_a_reference_named_for_a_table_is_an_overlay_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path)
    overlay = root / "schemas" / "overlay.yaml"
    overlay.write_text(
        overlay.read_text().replace(
            "files:\n", "files:\n  exporterset.txt:\n    reference: x.json\n"
        )
    )
    assert main(["crds", "--root", str(root)]) == 1
    assert capsys.readouterr().err.strip() == (
        "crds: schemas/overlay.yaml: files.exporterset.txt: a reference schema (with its abridged "
        "fields) is for a '#Kind [plural.group/version]' page of descriptions only"
    )
