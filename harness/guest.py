"""The marker guest: a small disk that boots under QEMU (TCG, SeaBIOS) and says so.

A 32 MiB raw disk, a FAT16 "superfloppy" (no partition table) holding SYSLINUX, Debian's
kernel and a busybox initramfs whose `/init` prints `MARKER` and a counter on the serial
console (ttyS0) every second, so a console attached after power-on still reads it. Built
offline from Debian's packages, without root-only steps (no loop mount): the kernel's
.deb is fetched with `apt-get download` and unpacked with `dpkg-deb` (not installed), the
disk is made with `mkfs.vfat -C`, `syslinux --install` and `mcopy`. Boots in seconds
under TCG on one vCPU with 256 MiB.

The disk is cached in the images cache folder under a name that hashes this recipe, as
the debootstrap base is: it is built once per cache folder (a fresh clone).

    python -m harness.guest    # prints the disk's path (builds it when missing)

Host tools: apt-get and dpkg-deb (Debian), and the packages `DEBIAN_PACKAGES` names.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from harness.images import CACHE, ImageError

__all__ = ["DEBIAN_PACKAGES", "DISK_MIB", "MARKER", "build_marker_guest", "main"]

MARKER = "JMP-MARKER-READY"
DISK_MIB = 32
# The host packages the build runs (busybox-static also gives the guest its userland).
DEBIAN_PACKAGES = ("syslinux", "syslinux-common", "mtools", "dosfstools", "busybox-static")
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: one static binary
KERNEL_META = "linux-image-amd64"  # depends on the current linux-image-<version>-amd64
INIT = f"""#!/bin/sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev 2>/dev/null
echo "JMP-GUEST-UP $(/bin/busybox uname -r)"
i=0
while :; do echo "{MARKER} $i"; i=$((i+1)); /bin/busybox sleep 1; done
"""
# SYSLINUX speaks on COM1 too; the kernel's console is ttyS0; a panic reboots at once.
SYSLINUX_CFG = """SERIAL 0 115200
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND console=ttyS0,115200 panic=-1 quiet loglevel=3
"""
_TOOLS = {"mkfs.vfat": "dosfstools", "syslinux": "syslinux", "mcopy": "mtools"}


def _recipe_key() -> str:
    recipe = "\0".join([INIT, SYSLINUX_CFG, str(DISK_MIB), KERNEL_META])
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def _run(args: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(list(args), cwd=cwd, capture_output=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-10:]
        raise ImageError(
            f"{' '.join(args[:3])} failed (exit {done.returncode}):\n" + "\n".join(tail)
        )
    return done


def _require() -> None:
    missing = [package for tool, package in _TOOLS.items() if shutil.which(tool) is None]
    if not BUSYBOX.is_file():
        missing.append("busybox-static")
    if missing:
        raise ImageError(
            f"marker guest: missing {', '.join(missing)}: "
            f"apt-get install -y --no-install-recommends {' '.join(DEBIAN_PACKAGES)}"
        )


def _kernel(work: Path) -> Path:
    """Debian's current amd64 kernel image, out of its package (downloaded, not installed)."""
    depends = _run(["apt-cache", "depends", KERNEL_META]).stdout.decode()
    package = next(
        (
            line.split()[-1]
            for line in depends.splitlines()
            if line.strip().startswith("Depends: linux-image-")
        ),
        None,
    )
    if package is None:
        raise ImageError(f"marker guest: apt knows no {KERNEL_META}: run apt-get update")
    try:
        # As root apt downloads unsandboxed (its `_apt` user cannot write here): say so.
        _run(["apt-get", "download", "-o", "APT::Sandbox::User=root", package], cwd=work)
    except ImageError as error:
        raise ImageError(f"{error}\n(apt-get update may be needed)") from None
    (deb,) = work.glob(f"{package}_*.deb")
    tree = work / "kernel"
    tree.mkdir()
    _run(["dpkg-deb", "--extract", str(deb), str(tree)])
    (vmlinuz,) = (tree / "boot").glob("vmlinuz-*")
    return vmlinuz


def _newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A cpio archive in the kernel's initramfs format (newc): (path, mode, data)."""
    out = io.BytesIO()
    for inode, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        encoded = name.encode() + b"\0"
        fields = [inode, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        out.write(b"070701" + b"".join(b"%08X" % f for f in fields) + encoded)
        out.write(b"\0" * (-(110 + len(encoded)) % 4))
        out.write(data + b"\0" * (-len(data) % 4))
    return out.getvalue()


def _initramfs() -> bytes:
    directory, executable, link = 0o40755, 0o100755, 0o120777
    entries = [
        ("bin", directory, b""),
        ("dev", directory, b""),
        ("proc", directory, b""),
        ("sys", directory, b""),
        ("bin/busybox", executable, BUSYBOX.read_bytes()),
        ("bin/sh", link, b"busybox"),
        ("init", executable, INIT.encode()),
    ]
    return gzip.compress(_newc(entries), compresslevel=9, mtime=0)


def build_marker_guest(cache: Path = CACHE) -> Path:
    """The marker guest's raw disk in `cache`, built when missing."""
    target = cache / f"marker-guest-{_recipe_key()}.img"
    if target.is_file():
        return target
    _require()
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="marker-guest-", dir=cache) as folder:
        work = Path(folder)
        os.chmod(work, 0o755)
        vmlinuz = _kernel(work)
        files = {"vmlinuz": vmlinuz.read_bytes(), "initrd.gz": _initramfs()}
        files["syslinux.cfg"] = SYSLINUX_CFG.encode()
        for name, data in files.items():
            (work / name).write_bytes(data)
        disk = work / "disk.img"
        _run(["mkfs.vfat", "-C", "-n", "JMPBOOT", str(disk), str(DISK_MIB * 1024)])
        _run(["syslinux", "--install", str(disk)])  # mtools-based: an unmounted file
        _run(["mcopy", "-i", str(disk), *(str(work / name) for name in files), "::/"])
        partial = target.with_suffix(".partial")
        shutil.move(disk, partial)
        partial.rename(target)
    print(f"guest: marker guest {target.name} in {time.monotonic() - started:.0f} s")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.guest", description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE, help="the cache folder")
    args = parser.parse_args(argv)
    try:
        print(build_marker_guest(args.cache))
    except ImageError as error:
        print(f"guest: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
