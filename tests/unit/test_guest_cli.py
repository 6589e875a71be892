"""`python -m harness.guest`: which guests it makes (`make image` asks for all of them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.guest import GUESTS, main


def _cached(cache: Path) -> dict[str, Path]:
    """Every guest's disk present in `cache`, so nothing is built."""
    disks = {name: cache / guest.file_name() for name, guest in GUESTS.items()}
    for disk in disks.values():
        disk.touch()
    return disks


def test_all_makes_every_guest_the_node_tier_boots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    disks = _cached(tmp_path)
    assert main(["--all", "--cache", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(disks[name]) for name in GUESTS]


def test_without_names_it_makes_the_seabios_guest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    disks = _cached(tmp_path)
    assert main(["--cache", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(disks["bios"])]
