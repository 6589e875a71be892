"""The parts of harness/images.py that need no build: the mirror debootstrap uses, the
pip settings handed to a build as secrets, and when an archive is built again."""

from __future__ import annotations

import configparser
import fcntl
import subprocess
import sys
from pathlib import Path

import pytest

from harness.images import (
    PIP_CA_SECRET,
    PIP_CONF_SECRET,
    ImageError,
    apt_mirror,
    build_once,
    pip_secrets,
)


def test_the_mirror_comes_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.invalid/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n"
    )
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.invalid/debian"


def test_the_mirror_comes_from_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "deb-src http://src.invalid/debian bookworm main\n"
        "deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n"
    )
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.invalid/debian"


def test_no_source_for_the_suite_says_so(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    with pytest.raises(ImageError, match="no apt source for bookworm"):
        apt_mirror("bookworm", tmp_path)


def test_pip_secrets_keep_the_index_and_ca_and_drop_host_paths(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    environ = {
        "PIP_CONFIG_FILE": "/dev/null",  # only these settings, not the machine's
        "PIP_INDEX_URL": "https://user:token@index.invalid/simple",
        "PIP_CERT": str(ca),
        "PIP_FIND_LINKS": "/opt/wheels",
        "PIP_DEFAULT_TIMEOUT": "180",
    }
    (tmp_path / "out").mkdir()
    secrets = pip_secrets(tmp_path / "out", environ, sys.executable)
    assert secrets[PIP_CA_SECRET] == ca
    conf = configparser.ConfigParser()
    conf.read(secrets[PIP_CONF_SECRET])
    assert dict(conf["global"]) == {
        "index-url": "https://user:token@index.invalid/simple",
        "timeout": "180",
    }


def test_no_settings_no_secrets(tmp_path: Path) -> None:
    assert pip_secrets(tmp_path, {"PIP_CONFIG_FILE": "/dev/null"}, sys.executable) == {}


def test_a_current_archive_is_found_while_another_process_builds(tmp_path: Path) -> None:
    """The build lock held elsewhere (an image test's build) does not hold up a caller
    whose archive is current; one that must build waits for the lock, and builds."""
    archive = tmp_path / "image.tar"
    made: list[str] = []

    def make() -> None:
        made.append("built")
        archive.write_bytes(b"archive")

    build_once(archive, "inputs-1", "image", make, layer_cache=True, cache=tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / ".build.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        build_once(archive, "inputs-1", "image", make, layer_cache=True, cache=tmp_path)
        assert made == ["built"]  # current: neither built nor waited
        with (tmp_path / ".build.lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                raise AssertionError("the other process no longer holds the lock")
            except BlockingIOError:
                pass
    finally:
        holder.terminate()
        holder.wait(timeout=10)
    build_once(archive, "inputs-2", "image", make, layer_cache=True, cache=tmp_path)
    assert made == ["built", "built"]  # new inputs: built again, once the lock was free
    assert (tmp_path / "image.tar.inputs").read_text() == "inputs-2"


HOLD_LOCK = """
import fcntl, sys, time
lock = open(sys.argv[1], "w")
fcntl.flock(lock, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""
