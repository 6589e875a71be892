"""requirements.lock pins every package the image installs, with hashes, and goes stale
(`make check` fails) when pyproject.toml changes. The staleness tests resolve with uv
against the package index (about 2 s each)."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.deploy_render import REPO
from harness.lock import LOCK, stale

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every entry in the lock."""
    entries: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
            entries[canonicalize_name(match[1])] = (match[2], hashes)
    return entries


def test_every_locked_package_has_hashes() -> None:
    entries = locked()
    assert entries
    assert all(hashes for _, hashes in entries.values())


def test_the_lock_holds_the_exact_pins_and_the_build_requirements() -> None:
    entries = locked()
    assert PYPROJECT["project"]["dependencies"] and PYPROJECT["build-system"]["requires"]
    for spec in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(spec)
        (pin,) = [s.version for s in requirement.specifier if s.operator == "=="]
        assert entries[canonicalize_name(requirement.name)][0] == pin
    for spec in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(spec)
        assert requirement.specifier.contains(entries[canonicalize_name(requirement.name)][0])


def test_nothing_of_the_extras_is_locked() -> None:
    entries = locked()
    extras = [s for extra in PYPROJECT["project"]["optional-dependencies"].values() for s in extra]
    assert extras
    for spec in extras:
        name = canonicalize_name(Requirement(spec).name)
        assert name == "virtualtarget" or name not in entries, name


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(LOCK, tmp_path / LOCK.name)
    return tmp_path


def test_the_committed_lock_is_current(project: Path) -> None:
    assert stale(project / "pyproject.toml", project / LOCK.name) == []


def test_a_new_dependency_makes_the_lock_stale(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    assert '    "PyYAML==6.0.3",\n' in text
    added = '    "PyYAML==6.0.3",\n    "six==1.17.0",\n'
    pyproject.write_text(text.replace('    "PyYAML==6.0.3",\n', added))
    diff = stale(pyproject, project / LOCK.name)
    assert "+six==1.17.0 \\" in diff
