"""Jumpstarter main's client on this machine: `jmp` and its Python API from the same wheels
main's exporter image installs (`harness.main_images.wheels`), so that a test leases main's
instances with main's client, as main's own e2e does.

A virtual environment under `.cache/jumpstarter-main/`, made once per set of wheels with uv:
the client's packages (`CLIENT_PACKAGES`) from the wheels, their dependencies at the
versions main's `uv.lock` pins (the wheels' `requirements.txt`, as constraints).

    python -m harness.main_client       # prints the environment's python
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from harness.images import ImageError
from harness.main_images import WORK, once, uv, wheels

__all__ = ["CLIENT_PACKAGES", "client_python", "main"]

# What `jmp shell` and tests/lease_client.py use of main: the client and its CLI, and the
# client classes of what main's QEMU provisioner exports (the QEMU driver's power, flasher
# and console, the TCP and unix-socket networks).
CLIENT_PACKAGES = (
    "jumpstarter-cli",
    "jumpstarter-driver-qemu",
    "jumpstarter-driver-network",
    "jumpstarter-driver-power",
    "jumpstarter-driver-opendal",
    "jumpstarter-driver-pyserial",
)
_HASHES = re.compile(r"\s*\\?\s*--hash=\S+")


def client_python() -> Path:
    """The python of main's client environment, made unless it is there."""
    built = wheels()

    def make(folder: Path) -> None:
        # Constraints carry no hashes for uv: the pins alone, one per line.
        pins = _HASHES.sub("", (built / "requirements.txt").read_text())
        constraints = folder / "constraints.txt"
        constraints.write_text("\n".join(line.rstrip(" \\") for line in pins.splitlines()) + "\n")
        log = folder / "install.log"
        with log.open("ab") as sink:
            for command in (
                # relocatable: made in a partial folder, renamed when whole
                [uv(), "venv", "--quiet", "--relocatable", "--python", sys.executable,
                 str(folder / "venv")],
                # Main's wheels are development releases (VERSION): allowed, and preferred
                # to the releases on the index; every other package is pinned.
                # Bytecode compiled: a client started with PYTHONDONTWRITEBYTECODE set
                # would otherwise compile its imports each time.
                [uv(), "pip", "install", "--quiet", "--python", str(folder / "venv/bin/python"),
                 "--compile-bytecode", "--prerelease", "allow",
                 "--find-links", str(built / "wheels"), "--constraint", str(constraints),
                 *CLIENT_PACKAGES],
            ):  # fmt: skip
                if subprocess.run(command, stdout=sink, stderr=sink).returncode != 0:
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                    raise ImageError(f"{tail}\nmain-client: {' '.join(command)} failed")

    return once(WORK / f"client-{built.name}", make) / "venv" / "bin" / "python"


def main() -> int:
    try:
        print(client_python())
    except ImageError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
