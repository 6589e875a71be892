"""The containerDisks built for KubeVirt end in a sector that keeps their disk's CRC32, the
checksum virt-handler writes into a VMI's status, within KubeVirt's int32 field
(harness/kubevirt_build.py: kube-apiserver refuses it from 2^31 on)."""

from __future__ import annotations

import tarfile
import zlib
from pathlib import Path

import pytest

from harness.kubevirt_build import INT32_MAX, SECTOR, containerdisk, crc_sector


def _disk(folder: Path, content: bytes) -> Path:
    path = folder / "guest.img"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("seed", range(8))
def test_the_sector_keeps_any_disk_s_crc32_within_int32(tmp_path: Path, seed: int) -> None:
    disk = _disk(tmp_path, bytes([seed]) * 4096 + seed.to_bytes(4, "little"))
    sector = crc_sector(disk)
    assert len(sector) == SECTOR
    assert zlib.crc32(disk.read_bytes() + sector) <= INT32_MAX


def test_a_disk_whose_crc32_is_past_int32_gets_a_sector_that_brings_it_back(
    tmp_path: Path,
) -> None:
    content = next(
        c for n in range(64) if zlib.crc32(c := n.to_bytes(2, "little") * 512) > INT32_MAX
    )
    disk = _disk(tmp_path, content)
    assert zlib.crc32(disk.read_bytes() + crc_sector(disk)) <= INT32_MAX


def test_the_containerdisk_holds_the_disk_then_the_sector(tmp_path: Path) -> None:
    content = b"marker" * 1000
    disk = _disk(tmp_path, content)
    archive = containerdisk(disk, "localhost/test/disk:1", tmp_path)
    with tarfile.open(archive) as outer:
        layers = [m for m in outer.getmembers() if m.name.endswith(".tar")]
        layer = outer.extractfile(layers[0])
        assert layer is not None
        with tarfile.open(fileobj=layer) as inner:
            member = inner.getmember(f"disk/{disk.name}")
            held = inner.extractfile(member)
            assert held is not None
            data = held.read()
    assert (member.uid, member.mode) == (107, 0o440)
    assert data == content + crc_sector(disk)
    assert zlib.crc32(data) <= INT32_MAX
