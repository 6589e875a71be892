"""A Jumpstarter client session, run as its own process by the tests: Jumpstarter 0.9.0's
Python client (`ClientConfigV1Alpha1.lease`, the API `jmp shell` uses) leases an exporter
by its labels from the controller the config names, and calls its QEMU driver, or (with
`--driver ""`) the `power` and `console` drivers at the top of the export, as a KubeVirt
instance has them (#927's `KubevirtPower` and `KubevirtConsole`, whose console is a
stream, read through Jumpstarter's own `PexpectAdapter`).

    python -m tests.lease_client --config client.yaml --selector pool=guest \\
        --flash disk.img --boots 2 --marker JMP-MARKER-READY

With the lease: flash the image (streamed from here), then `--boots` times power on, read
the console until the marker, power off; then release the lease (leaving the block, as
`jmp shell` does). A console that gives not one byte for `--silent-after` seconds fails
the session at once: the guest prints from its first second (firmware, then the marker
every second), so a silent console is a defect, not a slow boot. With `--reopen-after`, a
console silent that long is opened again first: #927's KubeVirt console gives up at once,
and silently, when opened before KubeVirt made the VMI (HTTP 404; it retries only 400).
Each step prints one JSON line, `{"event": ..., "at": <time.time()>, ...}`, for the test to
time; a failure prints the error and exits 1. The console's output and the exporter's log
(streamed, as `jmp shell` streams it) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pexpect

__all__ = ["main"]


ANY_BYTE = re.compile(rb"[\s\S]")


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "at": time.time(), **fields}), flush=True)


def _console(console: Any) -> Any:
    """A pexpect session on the console: the pyserial client's own, else Jumpstarter's
    adapter over the driver's `connect` stream."""
    if hasattr(console, "pexpect"):
        return console.pexpect()
    from jumpstarter_driver_network.adapters import PexpectAdapter

    return PexpectAdapter(client=console)


def boot(
    qemu: Any, marker: str, timeout: float, silent_after: float, reopen_after: float = 0
) -> str:
    """Power on, read the console until the marker, power off: the marker's line. A
    TimeoutError when the console gave not one byte for `silent_after` seconds. With
    `reopen_after`, a console silent that long is closed and opened again (each time an
    event), within `silent_after` in all."""
    say("power on")
    qemu.power.on()
    say("powered on")
    began = time.monotonic()
    try:
        while True:
            left = silent_after - (time.monotonic() - began)
            wait = min(left, reopen_after) if reopen_after else left
            # The pty drops what nobody reads: attach after power-on; the guest repeats it.
            with _console(qemu.console) as console:
                console.logfile_read = sys.stderr.buffer
                if console.expect([ANY_BYTE, pexpect.TIMEOUT], timeout=max(wait, 0)) == 0:
                    console.expect_exact(marker, timeout=timeout)
                    console.expect_exact("\n", timeout=timeout)
                    line = f"{marker} {console.before.decode(errors='replace').strip()}"
                    break
            silent = time.monotonic() - began
            if silent >= silent_after:
                raise TimeoutError(f"console silent: not one byte in {silent_after:.0f} s")
            say("console reopened", after=round(silent, 1))
        say("marker", line=line)
        return line
    finally:
        qemu.power.off()
        say("powered off")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lease_client", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="a ClientConfig file")
    parser.add_argument("--selector", required=True, help="the exporter's labels, k=v,...")
    parser.add_argument(
        "--driver", default="qemu", help='the QEMU driver\'s name in the export ("": the top)'
    )
    parser.add_argument("--flash", type=Path, help="a disk image to flash first")
    parser.add_argument("--boots", type=int, default=1)
    parser.add_argument("--marker", default="JMP-MARKER-READY")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per boot")
    parser.add_argument(
        "--silent-after", type=float, default=60.0, help="seconds of a silent console to fail"
    )
    parser.add_argument(
        "--reopen-after",
        type=float,
        default=0.0,
        help="seconds of a silent console to open it again (0: never)",
    )
    args = parser.parse_args(argv)

    from jumpstarter.config.client import ClientConfigV1Alpha1

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")

    config = ClientConfigV1Alpha1.from_file(args.config)
    say("lease requested", selector=args.selector)
    try:
        with config.lease(selector=args.selector, duration=timedelta(minutes=30)) as lease:
            say("lease acquired", lease=lease.name, exporter=lease.exporter_name)
            # The exporter's log, as `jmp shell` shows it, into ours (stderr).
            with lease.connect() as client, client.log_stream():
                qemu = getattr(client, args.driver) if args.driver else client
                if args.flash:
                    say("flash started", size=args.flash.stat().st_size)
                    qemu.flasher.flash(str(args.flash))
                    say("flashed")
                for _ in range(args.boots):
                    boot(qemu, args.marker, args.timeout, args.silent_after, args.reopen_after)
            say("releasing", lease=lease.name)
    except Exception as error:  # the test reads the reason from our output
        say("failed", error=f"{type(error).__name__}: {error}")
        # The whole chain, each group's members too: a stream's failure in Jumpstarter's
        # client arrives wrapped in a TaskGroup's ExceptionGroup.
        print("".join(traceback.format_exception(error)), file=sys.stderr, flush=True)
        return 1
    say("released")
    return 0


if __name__ == "__main__":
    sys.exit(main())
