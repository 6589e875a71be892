"""`virtualtarget certs`: prints what it did, writes the overlay bundle, fails in one line."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
import yaml

from certs.overlay import CA_BUNDLE_CONFIGMAP, CA_BUNDLE_FILE
from harness.deploy_render import DEPLOY
from virtualtarget.cli import main

ARGS = ["certs", "--service", "virtualtarget-webhook", "--namespace", "virtualtarget-system"]


def test_creates_then_keeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    assert main([*ARGS, "--out", str(out), "--host", "127.0.0.1", "--host", "localhost"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"certs: created CA {out / 'ca.crt'}"
    assert printed[1].startswith(f"certs: issued serving certificate {out / 'tls.crt'}")
    assert "127.0.0.1, localhost" in printed[1]

    assert main([*ARGS, "--out", str(out), "--host", "127.0.0.1", "--host", "localhost"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"certs: kept CA {out / 'ca.crt'}",
        f"certs: kept serving certificate {out / 'tls.crt'}",
    ]


def test_writes_the_ca_bundle_into_an_overlay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overlay = tmp_path / "self-signed"
    shutil.copytree(DEPLOY / "overlays" / "self-signed", overlay)
    out = overlay / "certs"
    assert main([*ARGS, "--out", str(out), "--kustomize-overlay", str(overlay)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"certs: wrote the CA bundle to {overlay / CA_BUNDLE_FILE}"
    )
    document = yaml.safe_load((overlay / CA_BUNDLE_FILE).read_text())
    assert document["metadata"]["name"] == CA_BUNDLE_CONFIGMAP
    assert document["metadata"]["annotations"] == {"config.kubernetes.io/local-config": "true"}
    assert base64.b64decode(document["data"]["caBundle"]) == (out / "ca.crt").read_bytes()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--kustomize-overlay", "{tmp}/missing"], "not a kustomize overlay"),
        (["--days", "0"], "--days: must be between 1 and 3650"),
        (["--days", "soon"], "--days: not a whole number of days: 'soon'"),
    ],
)
def test_errors_are_one_line_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = [*ARGS, "--out", str(tmp_path / "c"), *[a.format(tmp=tmp_path) for a in extra]]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse reports usage errors by exiting with 2
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code != 0
    assert message in err
    assert "Traceback" not in err


def test_unwritable_output_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main([*ARGS, "--out", str(blocker / "certs")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("certs: ")
