"""`harness.jumpstarter_build`: one build description per source tarball."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from harness.gobuild import build_flags
from harness.jumpstarter_build import (
    DEFAULT_KEYS,
    MAIN_JUMPSTARTER_SOURCE,
    MAIN_SOURCE,
    RELEASE_OPERATOR_SOURCE,
    RELEASE_SOURCE,
    SOURCES,
    JumpstarterBuildError,
    built,
    main,
)


def test_each_source_is_named_by_its_key() -> None:
    assert SOURCES == {
        "release": RELEASE_SOURCE,
        "main": MAIN_SOURCE,
        "operator": RELEASE_OPERATOR_SOURCE,
        "main-jumpstarter": MAIN_JUMPSTARTER_SOURCE,
    }
    assert DEFAULT_KEYS == ("release", "main")  # `make jumpstarter`: what the tests run


def test_the_releases_operator_is_a_second_part_of_the_release_tarball(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert RELEASE_OPERATOR_SOURCE.tarball() == RELEASE_SOURCE.tarball()
    assert RELEASE_OPERATOR_SOURCE.ldflags() == RELEASE_SOURCE.ldflags()
    (binary,) = RELEASE_OPERATOR_SOURCE.binaries
    assert (binary.name, binary.package, binary.module) == (
        "operator",
        "./cmd",
        "controller/deploy/operator",
    )
    tarball = tmp_path / "jumpstarter-0.9.0-controller.tar.gz"
    tarball.write_bytes(b"one tarball")
    monkeypatch.setenv("JUMPSTARTER_SOURCE", str(tarball))
    monkeypatch.setenv("VIRTUALTARGET_BIN_DIR", str(tmp_path / "bin"))
    with pytest.raises(JumpstarterBuildError) as release:
        built(RELEASE_SOURCE)
    with pytest.raises(JumpstarterBuildError) as operator:
        built(RELEASE_OPERATOR_SOURCE)
    # each its own cache folder: one's stamp never stands for the other's build
    folders = [re.search(r"built in (\S+);", str(e.value)) for e in (release, operator)]
    digest = hashlib.sha256(b"one tarball").hexdigest()[:16]
    flags = build_flags(RELEASE_SOURCE.ldflags())
    key = hashlib.sha256(f"{digest} {flags}".encode()).hexdigest()[:16]
    assert [Path(m[1]).name if m else None for m in folders] == [
        f"jumpstarter-{key}",
        f"jumpstarter-{key}-operator",
    ]


def test_the_release_is_stamped_with_its_tag_and_main_with_its_commit_only() -> None:
    assert RELEASE_SOURCE.ldflags() == (
        "-X main.version=v0.9.0 -X main.gitCommit=a084412198a554514ecba40be0bd6d4e53c2d9e7"
    )
    # an untagged commit keeps main's default version ("dev"): its provisioner then
    # leaves the default images' `:latest` alone
    assert MAIN_SOURCE.ldflags() == "-X main.gitCommit=b1f2bb41aac09cda79a2afa4b2f4fe07f3c6b0ea"


def test_mains_operator_builds_in_its_own_module() -> None:
    modules = {binary.name: binary.module for binary in MAIN_SOURCE.binaries}
    assert modules == {
        "exporter-set-controller": "controller",
        "operator": "controller/deploy/operator",
    }


def test_a_missing_tarball_names_the_variable_that_sets_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUMPSTARTER_MAIN_SOURCE", str(tmp_path / "absent.tar.gz"))
    with pytest.raises(JumpstarterBuildError, match="set JUMPSTARTER_MAIN_SOURCE"):
        built(MAIN_SOURCE)


def test_an_unknown_key_builds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nightly"]) == 2
    assert "known: release, main, operator" in capsys.readouterr().err
