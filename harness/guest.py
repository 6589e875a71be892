"""The marker guests: small disks that boot under QEMU (TCG) and say so.

Each is a raw disk, a FAT "superfloppy" (no partition table) holding a boot loader,
Debian's kernel and a busybox initramfs whose `/init` prints `MARKER` and a counter on the
serial console every second, so a console attached after power-on still reads it:

- `bios` (x86_64, SeaBIOS): 32 MiB, SYSLINUX, the kernel's console ttyS0;
- `x86_64-uefi` (OVMF): 32 MiB, systemd-boot as `/EFI/BOOT/BOOTX64.EFI`, console ttyS0;
- `aarch64-uefi` (AAVMF, QEMU's `virt` machine): 64 MiB, systemd-boot as
  `/EFI/BOOT/BOOTAA64.EFI`, Debian's arm64 kernel (an EFI-stub Image of 33 MB) and
  busybox, console ttyAMA0.

UEFI firmware boots a whole-disk FAT as removable media, from its `/EFI/BOOT` loader.
Built offline from Debian's packages, without root-only steps (no loop mount): each .deb
(the kernel; for a guest of another architecture its busybox; for UEFI systemd-boot) is
fetched with `apt-get download` and unpacked with `dpkg-deb` (never installed), the disk
is made with `mkfs.vfat -C`, and filled with mtools (`mmd`, `mcopy`; `syslinux
--install` works on the file too). Each boots in seconds under TCG on one vCPU with 256 MiB.

A disk is cached in the images cache folder under a name that hashes its recipe, as the
debootstrap base is: it is built once per cache folder (a fresh clone).

    python -m harness.guest [bios|x86_64-uefi|aarch64-uefi ...]   # prints the disks' paths

Host tools: apt-get and dpkg-deb (Debian), the packages `DEBIAN_PACKAGES` names, and for
the aarch64 guest apt's lists of the `FOREIGN_ARCHITECTURES` (`dpkg --add-architecture
arm64 && apt-get update`: `.ci/run` does this).
"""

from __future__ import annotations

import argparse
import fcntl
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
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.images import CACHE, ImageError

__all__ = [
    "DEBIAN_PACKAGES",
    "FOREIGN_ARCHITECTURES",
    "GUESTS",
    "MARKER",
    "Guest",
    "build_guest",
    "build_marker_guest",
    "main",
]

MARKER = "JMP-MARKER-READY"
# The host packages the build runs (busybox-static also gives the x86_64 guests their
# userland).
DEBIAN_PACKAGES = ("syslinux", "syslinux-common", "mtools", "dosfstools", "busybox-static")
# The architectures whose packages apt must list besides the host's (the aarch64 guest's).
FOREIGN_ARCHITECTURES = ("arm64",)
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: one static binary
INIT = f"""#!/bin/sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev 2>/dev/null
echo "JMP-GUEST-UP $(/bin/busybox uname -r)"
i=0
while :; do echo "{MARKER} $i"; i=$((i+1)); /bin/busybox sleep 1; done
"""
# A panic reboots at once; the kernel says little before the marker.
KERNEL_OPTIONS = "panic=-1 quiet loglevel=3"
# SYSLINUX speaks on COM1 too; the kernel's console is ttyS0.
SYSLINUX_CFG = f"""SERIAL 0 115200
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND console=ttyS0,115200 {KERNEL_OPTIONS}
"""
LOADER_CONF = "default marker.conf\ntimeout 0\n"  # systemd-boot: no menu, the one entry


@dataclass(frozen=True)
class Guest:
    """One marker guest's recipe."""

    name: str
    deb_arch: str  # Debian's name of the guest's architecture
    console: str  # the kernel's serial console
    disk_mib: int
    # UEFI: systemd-boot's file for this architecture, and where UEFI firmware looks for
    # the loader of removable media; none: SYSLINUX.
    uefi_loader: str = ""
    removable_path: str = ""

    def entry(self) -> str:
        """systemd-boot's loader entry."""
        options = f"console={self.console} {KERNEL_OPTIONS}"
        return f"linux /vmlinuz\ninitrd /initrd.gz\noptions {options}\n"

    def key(self) -> str:
        loader = self.entry() + LOADER_CONF if self.uefi_loader else SYSLINUX_CFG
        parts = [INIT, loader, str(self.disk_mib), f"linux-image-{self.deb_arch}"]
        if self.uefi_loader:  # the SeaBIOS guest's key is the one it always had
            parts += [self.deb_arch, self.uefi_loader]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]

    def file_name(self) -> str:
        prefix = "marker-guest" if not self.uefi_loader else f"marker-guest-{self.name}"
        return f"{prefix}-{self.key()}.img"


GUESTS = {
    guest.name: guest
    for guest in (
        Guest("bios", "amd64", "ttyS0,115200", 32),
        Guest(
            "x86_64-uefi",
            "amd64",
            "ttyS0,115200",
            32,
            uefi_loader="systemd-bootx64.efi",
            removable_path="EFI/BOOT/BOOTX64.EFI",
        ),
        # Debian's arm64 kernel is an uncompressed Image (the EFI stub boots it): 33 MB.
        Guest(
            "aarch64-uefi",
            "arm64",
            "ttyAMA0",
            64,
            uefi_loader="systemd-bootaa64.efi",
            removable_path="EFI/BOOT/BOOTAA64.EFI",
        ),
    )
}
_TOOLS = {"mkfs.vfat": "dosfstools", "syslinux": "syslinux", "mcopy": "mtools", "mmd": "mtools"}


def _run(args: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(list(args), cwd=cwd, capture_output=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-10:]
        raise ImageError(
            f"{' '.join(args[:3])} failed (exit {done.returncode}):\n" + "\n".join(tail)
        )
    return done


def _native() -> str:
    return _run(["dpkg", "--print-architecture"]).stdout.decode().strip()


def _require(guest: Guest) -> None:
    missing = [package for tool, package in _TOOLS.items() if shutil.which(tool) is None]
    if guest.deb_arch == _native() and not BUSYBOX.is_file():
        missing.append("busybox-static")
    if missing:
        raise ImageError(
            f"marker guest: missing {', '.join(dict.fromkeys(missing))}: "
            f"apt-get install -y --no-install-recommends {' '.join(DEBIAN_PACKAGES)}"
        )
    foreign = _run(["dpkg", "--print-foreign-architectures"]).stdout.decode().split()
    if guest.deb_arch != _native() and guest.deb_arch not in foreign:
        raise ImageError(
            f"marker guest {guest.name}: apt lists no {guest.deb_arch} packages: "
            f"dpkg --add-architecture {guest.deb_arch} && apt-get update"
        )


def _package(name: str, guest: Guest) -> str:
    return name if guest.deb_arch == _native() else f"{name}:{guest.deb_arch}"


def _unpacked(package: str, work: Path) -> Path:
    """`package` downloaded into `work` and unpacked (not installed): its tree."""
    try:
        # As root apt downloads unsandboxed (its `_apt` user cannot write here): say so.
        _run(["apt-get", "download", "-o", "APT::Sandbox::User=root", package], cwd=work)
    except ImageError as error:
        raise ImageError(f"{error}\n(apt-get update may be needed)") from None
    name, _, arch = package.partition(":")
    (deb,) = work.glob(f"{name}_*_{arch or '*'}.deb")
    tree = work / name
    tree.mkdir()
    _run(["dpkg-deb", "--extract", str(deb), str(tree)])
    return tree


def _kernel(guest: Guest, work: Path) -> Path:
    """Debian's current kernel image of the guest's architecture, out of its package."""
    meta = _package(f"linux-image-{guest.deb_arch}", guest)
    depends = _run(["apt-cache", "depends", meta]).stdout.decode()
    package = next(
        (
            line.split()[-1]
            for line in depends.splitlines()
            if line.strip().startswith("Depends: linux-image-")
        ),
        None,
    )
    if package is None:
        raise ImageError(f"marker guest: apt knows no {meta}: run apt-get update")
    (vmlinuz,) = (_unpacked(package, work) / "boot").glob("vmlinuz-*")
    return vmlinuz


def _busybox(guest: Guest, work: Path) -> bytes:
    """The host's static busybox for a guest of its architecture, else the guest's own."""
    if guest.deb_arch == _native():
        return BUSYBOX.read_bytes()
    return (_unpacked(_package("busybox-static", guest), work) / "bin" / "busybox").read_bytes()


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


def _initramfs(busybox: bytes) -> bytes:
    directory, executable, link = 0o40755, 0o100755, 0o120777
    entries = [
        ("bin", directory, b""),
        ("dev", directory, b""),
        ("proc", directory, b""),
        ("sys", directory, b""),
        ("bin/busybox", executable, busybox),
        ("bin/sh", link, b"busybox"),
        ("init", executable, INIT.encode()),
    ]
    return gzip.compress(_newc(entries), compresslevel=9, mtime=0)


def _files(guest: Guest, work: Path) -> dict[str, bytes]:
    """The disk's files by their path on it."""
    files = {
        "vmlinuz": _kernel(guest, work).read_bytes(),
        "initrd.gz": _initramfs(_busybox(guest, work)),
    }
    if not guest.uefi_loader:
        return files | {"syslinux.cfg": SYSLINUX_CFG.encode()}
    boot = _unpacked(_package("systemd-boot-efi", guest), work)
    loader = boot / "usr" / "lib" / "systemd" / "boot" / "efi" / guest.uefi_loader
    return files | {
        guest.removable_path: loader.read_bytes(),
        "loader/loader.conf": LOADER_CONF.encode(),
        "loader/entries/marker.conf": guest.entry().encode(),
    }


def _fill(disk: Path, files: dict[str, bytes], staging: Path) -> None:
    """Write `files` onto the unmounted FAT `disk` (mtools), folders first."""
    # A folder's name sorts before its children's.
    folders = sorted({str(f) for path in files for f in PurePosixPath(path).parents} - {"."})
    if folders:
        _run(["mmd", "-i", str(disk), *(f"::/{folder}" for folder in folders)])
    staging.mkdir()
    for index, (path, data) in enumerate(files.items()):
        local = staging / str(index)
        local.write_bytes(data)
        _run(["mcopy", "-i", str(disk), str(local), f"::/{path}"])


def build_guest(guest: Guest, cache: Path = CACHE) -> Path:
    """`guest`'s raw disk in `cache`, built when missing."""
    target = cache / guest.file_name()
    if target.is_file():
        return target
    _require(guest)
    cache.mkdir(parents=True, exist_ok=True)
    # One build of a guest at a time per cache folder: the node tier's two workers both ask
    # for the guests; the second finds the first's disk.
    with (cache / ".guest.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        return _build_guest(guest, target, cache)


def _build_guest(guest: Guest, target: Path, cache: Path) -> Path:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="marker-guest-", dir=cache) as folder:
        work = Path(folder)
        os.chmod(work, 0o755)  # apt's download may run as its own user
        files = _files(guest, work)
        disk = work / "disk.img"
        _run(["mkfs.vfat", "-C", "-n", "JMPBOOT", str(disk), str(guest.disk_mib * 1024)])
        if not guest.uefi_loader:
            _run(["syslinux", "--install", str(disk)])  # mtools-based: an unmounted file
        _fill(disk, files, work / "staging")
        partial = target.with_suffix(".partial")
        shutil.move(disk, partial)
        partial.rename(target)
    print(f"guest: marker guest {target.name} in {time.monotonic() - started:.0f} s")
    return target


def build_marker_guest(cache: Path = CACHE) -> Path:
    """The SeaBIOS marker guest's raw disk in `cache`, built when missing."""
    return build_guest(GUESTS["bios"], cache)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.guest", description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE, help="the cache folder")
    parser.add_argument("guests", nargs="*", help=f"of {', '.join(GUESTS)} (default: bios)")
    parser.add_argument("--all", action="store_true", help="every guest the node tier boots")
    args = parser.parse_args(argv)
    unknown = set(args.guests) - set(GUESTS)
    if unknown:
        parser.error(f"no guest {', '.join(sorted(unknown))}: one of {', '.join(GUESTS)}")
    try:
        for name in list(GUESTS) if args.all else args.guests or ["bios"]:
            print(build_guest(GUESTS[name], args.cache))
    except ImageError as error:
        print(f"guest: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
