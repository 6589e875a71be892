#!/opt/jumpstarter/bin/python3
"""qemu-system-x86_64 for Jumpstarter 0.9.0's QEMU driver: the guest first runs at the
driver's own `system_reset`, never before it.

Installed in the exporter image as /usr/local/bin/qemu-system-x86_64, ahead of Debian's
/usr/bin one on PATH. The driver (jumpstarter_driver_qemu/driver.py, `QemuPower.on`)
starts QEMU running, connects to its QMP socket (polling every 0.5 s) and sends
`system_reset`. On x86_64 the guest's SeaBIOS has been running meanwhile, and early in
its start it maps the BIOS area (0xe0000-0xfffff) to RAM through the q35 chipset's PAM
registers before it has copied itself there. A QEMU system reset does not set those
registers back to the ROM, so a reset in that window restarts the CPU at f000:fff0 in
zeroed RAM, where it runs zeros for ever: not one byte on the console, whatever the
client waits (docs/qemu.md, "A silent console"). The later the driver's connect, as under
load, the likelier the window.

So QEMU starts paused (`-S`) with a monitor of this program's own, made first and waited
for (`wait=on`) so it exists before the driver's; the driver's reset arrives as its RESET
event, and only then is the guest let run (`cont`): a reset of a guest that never ran. A
driver that never resets (it gives up on QMP after 10 s) still gets a running guest
after that time. Any other use (`--version`, no QMP socket) is Debian's QEMU as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
from types import FrameType

from qemu.qmp import QMPClient

QEMU = "/usr/bin/qemu-system-x86_64"
DRIVER_GIVES_UP_S = 10.0  # jumpstarter_driver_qemu: fail_after(10) around its QMP connect
PR_SET_PDEATHSIG = 1


def _die_with_this_process() -> None:
    """QEMU is killed when this process dies, even by SIGKILL (the driver's last resort)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


async def _run_after_the_reset(monitor: str, qemu: subprocess.Popen[bytes]) -> None:
    qmp = QMPClient("qemu-start")
    while qemu.poll() is None:  # QEMU makes the socket, then waits for this connection
        try:
            await qmp.connect(monitor)
        except Exception:  # not there yet (qemu.qmp wraps what the socket said)
            await asyncio.sleep(0.02)
            continue
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRIVER_GIVES_UP_S):
                    async for event in qmp.events:
                        if event["event"] == "RESET":
                            break
            await qmp.execute("cont")
        finally:
            await qmp.disconnect()
        return


def main(argv: list[str]) -> int:
    if "-qmp" not in argv:
        os.execv(QEMU, [QEMU, *argv])
    with tempfile.TemporaryDirectory(prefix="qemu-start-") as folder:
        monitor = os.path.join(folder, "qmp")
        qemu = subprocess.Popen(
            [QEMU, "-qmp", f"unix:{monitor},server=on,wait=on", *argv, "-S"],
            preexec_fn=_die_with_this_process,
        )

        def forward(signum: int, _frame: FrameType | None) -> None:
            qemu.send_signal(signum)

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, forward)
        try:
            asyncio.run(_run_after_the_reset(monitor, qemu))
        except Exception as error:  # QEMU gone (stopped or failed): its own exit tells
            print(f"qemu-start: {type(error).__name__}: {error}", file=sys.stderr)
        code = qemu.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
