"""The QEMU exporter image's qemu-system-x86_64 (images/qemu-exporter/qemu_start.py), run by
runc in the built image: the guest does not run until the first system_reset, whenever
that comes, and then boots the marker guest; and Jumpstarter 0.9.0's own QEMU driver,
which resets as soon as its QMP connect succeeds, starts it and reads the marker.

Debian's QEMU 7.2 alone hangs a SeaBIOS guest for good on a reset in the first half second
or so of its start (the console gives not one byte: docs/qemu.md, "A silent console"); that
window is the machine's timing, so this checks what closes it, not the window."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.guest import MARKER, build_marker_guest
from harness.images import CACHE, Unpacked, build_qemu_exporter, unpacked

pytestmark = pytest.mark.image

# Inside the image, by its own Python (Jumpstarter's venv: qemu.qmp, the 0.9.0 driver).
RESETS = """
import asyncio, json, os, select, subprocess, sys, tempfile, time
from qemu.qmp import QMPClient

disk, marker, delays = sys.argv[1], sys.argv[2].encode(), [float(d) for d in sys.argv[3:]]


def read_to(fd, until):
    seen, began = b"", time.monotonic()
    while until not in seen and time.monotonic() - began < 240:
        if select.select([fd], [], [], 1)[0]:
            seen += os.read(fd, 4096)
    return seen


async def reset_after(delay):
    folder = tempfile.mkdtemp()
    qemu = subprocess.Popen(
        ["qemu-system-x86_64", "-nodefaults", "-nographic", "-machine", "q35", "-m", "256M",
         "-qmp", f"unix:{folder}/qmp,server=on,wait=off", "-serial", "pty",
         "-drive", f"file={disk},format=raw,if=virtio,readonly=on"],
        stdin=subprocess.PIPE,
    )
    qmp = QMPClient("test")
    while True:
        try:
            await qmp.connect(f"{folder}/qmp")
            break
        except Exception:
            if qemu.poll() is not None:
                sys.exit(f"qemu-system-x86_64 exited {qemu.returncode}")
            await asyncio.sleep(0.05)
    chardevs = await qmp.execute("query-chardev")
    pty = next(c for c in chardevs if c["label"] == "serial0")["filename"].removeprefix("pty:")
    fd = os.open(pty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    before = (await qmp.execute("query-status"))["status"]
    await asyncio.sleep(delay)
    waited = (await qmp.execute("query-status"))["status"]
    await qmp.execute("system_reset")
    began = time.monotonic()
    seen = read_to(fd, marker)
    await qmp.disconnect()
    qemu.terminate()
    qemu.wait()
    return {"delay": delay, "before": before, "after the delay": waited,
            "marker": marker in seen, "seconds": round(time.monotonic() - began, 1)}


for delay in delays:
    print(json.dumps(asyncio.run(reset_after(delay))), flush=True)
"""
DRIVER = """
import json, shutil, sys, time
from jumpstarter.common.utils import serve
from jumpstarter_driver_qemu.driver import Qemu

disk, marker = sys.argv[1], sys.argv[2]
with serve(Qemu(arch="x86_64", smp=1, mem="256M")) as client:
    client.flasher.flash(disk)
    began = time.monotonic()
    client.power.on()
    with client.console.pexpect() as console:
        console.expect_exact(marker, timeout=240)
    took = time.monotonic() - began
    client.power.off()
print(json.dumps({"qemu": shutil.which("qemu-system-x86_64"), "seconds": round(took, 1)}))
"""
PYTHON = "/opt/jumpstarter/bin/python3"


@pytest.fixture(scope="module")
def exporter_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unpacked]:
    archive = build_qemu_exporter(cache=CACHE)  # as `make image` and the node tier build it
    with unpacked(archive, tmp_path_factory.mktemp("qemu-exporter") / "unpacked") as root:
        yield root


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The marker guest in a folder of its own, to mount: the image's user must read it."""
    folder = tmp_path_factory.mktemp("guest")
    folder.chmod(0o755)
    disk = shutil.copy(build_marker_guest(), folder / "disk.img")
    Path(disk).chmod(0o644)
    return folder


def _lines(result: Any) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_the_guest_waits_for_the_first_reset_then_boots(
    exporter_image: Unpacked, guest: Path
) -> None:
    delays = ["0", "0.3", "0.8"]
    result = exporter_image.run(
        [PYTHON, "-c", RESETS, "/guest/disk.img", MARKER, *delays],
        mounts={"/guest": guest},
        timeout=900,
    )
    runs = _lines(result)
    assert [run["delay"] for run in runs] == [float(d) for d in delays], result.stderr[-3000:]
    for run in runs:
        print(
            f"qemu-start: reset {run['delay']} s after the start, marker {run['seconds']} s later"
        )
        assert (run["before"], run["after the delay"]) == ("prelaunch", "prelaunch"), run
        assert run["marker"], (run, result.stderr[-3000:])


def test_jumpstarters_driver_starts_it_and_reads_the_marker(
    exporter_image: Unpacked, guest: Path
) -> None:
    result = exporter_image.run(
        [PYTHON, "-c", DRIVER, "/guest/disk.img", MARKER], mounts={"/guest": guest}, timeout=600
    )
    (boot,) = _lines(result)
    print(f"qemu-start: the 0.9.0 driver's power-on to the marker in {boot['seconds']} s")
    assert boot["qemu"] == "/usr/local/bin/qemu-system-x86_64"
