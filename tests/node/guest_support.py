"""A real Jumpstarter client session against a pool instance on the node: its run
(`tests/lease_client.py` in its own process), and what it printed.

The client is Jumpstarter 0.9.0's, its config made by the release's `jmp admin create
client`; the controller and router it talks to are the release's, serving the pool's
namespace on the node IP; the exporter is the instance's own `jmp run` in its Pod, with
the QEMU driver of the image this project ships.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.controlplane import REPO_ROOT

__all__ = [
    "ClientRun",
    "DiskSeen",
    "monotonic",
    "run_client",
    "run_client_watching_disk",
]

CLIENT_TIMEOUT_S = 600.0


def monotonic(at: float) -> float:
    """A moment of `time.time()` (the client's events) on `time.monotonic()`'s clock."""
    return time.monotonic() - (time.time() - at)


@dataclass
class ClientRun:
    """What one client session printed: its events in order, and its other output."""

    code: int
    events: list[dict[str, Any]]
    output: str

    def at(self, event: str, index: int = 0) -> float:
        """When the `index`th `event` happened (time.time())."""
        found = [e["at"] for e in self.events if e["event"] == event]
        assert len(found) > index, f"no {event!r} #{index} in:\n{self.output}"
        return float(found[index])

    def boot_times(self) -> str:
        """Power-on to marker of each boot."""
        times, powered_on = [], 0.0
        for event in self.events:
            if event["event"] == "power on":
                powered_on = event["at"]
            elif event["event"] == "marker":
                times.append(f"{event['at'] - powered_on:.1f} s")
        return ", ".join(times)

    def first(self, event: str) -> dict[str, Any]:
        return next(e for e in self.events if e["event"] == event)

    def count(self, event: str) -> int:
        return sum(1 for e in self.events if e["event"] == event)


def run_client(
    config: Path,
    selector: str,
    image: Path | None,
    boots: int,
    workdir: Path,
    *,
    driver: str = "qemu",
    client_path: Path | None = None,
    silent_after: float | None = None,
    reopen_after: float | None = None,
    python: str = sys.executable,
) -> ClientRun:
    """Lease by `selector`, flash `image` (if any), boot `boots` times to the marker,
    release. `driver` names the QEMU driver ("": power and console at the export's top);
    `client_path` goes on the client's PYTHONPATH (a driver's client classes); `python`
    is the client's environment (the release's, this venv, by default);
    `silent_after` bounds the console's first silence (the client's default otherwise),
    `reopen_after` opens a console silent that long again (never otherwise)."""
    command = [
        python,
        "-m",
        "tests.lease_client",
        "--config",
        str(config),
        "--selector",
        selector,
        "--driver",
        driver,
        *(("--flash", str(image)) if image is not None else ()),
        *(("--silent-after", str(silent_after)) if silent_after is not None else ()),
        *(("--reopen-after", str(reopen_after)) if reopen_after is not None else ()),
        "--boots",
        str(boots),
    ]
    env = {**os.environ, "HOME": str(workdir), "NONINTERACTIVE": "1"}
    if client_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(client_path), env.get("PYTHONPATH")]))
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
    )
    events = []
    for line in done.stdout.splitlines():
        if line.startswith('{"event"'):
            events.append(json.loads(line))
    output = f"stdout:\n{done.stdout}\nstderr (the console, the client's log):\n{done.stderr}"
    return ClientRun(done.returncode, events, output)


@dataclass
class DiskSeen:
    """The guest's disk files (`*/root` under a volume's host directory: the QEMU driver's
    temporary directory) seen while a client session ran, by path: the largest size."""

    files: dict[Path, int] = field(default_factory=dict)
    # Each file's directory's group, as seen then: the driver removes that directory when
    # the lease ends, before the test can look again.
    groups: dict[Path, int] = field(default_factory=dict)

    def look(self, directory: Path | None) -> None:
        if directory is None or not directory.is_dir():
            return
        for root in directory.glob("*/root"):
            try:
                size, group = root.stat().st_size, root.parent.stat().st_gid
            except OSError:  # removed meanwhile
                continue
            self.files[root] = max(size, self.files.get(root, 0))
            self.groups[root] = group


def run_client_watching_disk(
    where: Callable[[], Path | None], *client: Any, every: float = 0.2
) -> tuple[ClientRun, DiskSeen]:
    """`run_client(*client)`, looking every `every` seconds meanwhile at the host directory
    `where()` names for the guest's disk the exporter's driver writes there."""
    seen, done = DiskSeen(), threading.Event()
    result: list[ClientRun] = []

    def session() -> None:
        try:
            result.append(run_client(*client))
        finally:
            done.set()

    threading.Thread(target=session, daemon=True).start()
    while not done.wait(every):
        seen.look(where())
    assert result, "the client session raised"
    return result[0], seen
