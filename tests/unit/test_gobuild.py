"""Every Go build of the harness compiles and links with the same flags (`harness.gobuild`):
the Makefile's control plane, Jumpstarter's programs and KubeVirt's, read from the
commands each would run, without a build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import jumpstarter_build, kubevirt_build
from harness.deploy_render import REPO
from harness.gobuild import GCFLAGS, LDFLAGS, build_flags, goflags


def test_the_makefile_reads_the_flags_from_the_one_module() -> None:
    for name, value in (("gcflags", GCFLAGS), ("ldflags", LDFLAGS)):
        printed = subprocess.run(
            [sys.executable, "-m", "harness.gobuild", name],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert printed.strip() == value
    planned = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", "control-plane"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (build,) = [line for line in planned.splitlines() if "go build -v" in line]
    assert f'-gcflags="{GCFLAGS}"' in build
    assert f'-ldflags "{LDFLAGS} -X ' in build


def test_jumpstarter_s_programs_build_with_them_into_a_folder_named_by_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    commands: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(jumpstarter_build.subprocess, "run", run)
    source = jumpstarter_build.RELEASE_SOURCE
    jumpstarter_build._go_build(source, tmp_path, tmp_path / "out", tmp_path / "log")
    assert commands and all(
        c[2 : 2 + len(build_flags(source.ldflags()))] == build_flags(source.ldflags())
        for c in commands
    )
    folder = jumpstarter_build._cached(source).directory.name
    monkeypatch.setattr(jumpstarter_build, "build_flags", lambda *more: ["-other"])
    assert jumpstarter_build._cached(source).directory.name != folder


def test_kubevirt_s_builds_and_its_crds_program_compile_alike() -> None:
    assert kubevirt_build.go_env()["GOFLAGS"] == goflags("-mod=mod")
    assert f"-gcflags={GCFLAGS}" in build_flags()
