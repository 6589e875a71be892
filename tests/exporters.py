"""The exporters of a pool's instances on the loopback tier, where no kubelet runs them.

Each instance Pod's container runs Jumpstarter 0.9.0's `jmp run --exporter-config FILE` on
the config Secret the reconciler wrote. Here the same command runs as a local process, one
per instance Pod of the namespace, on that Secret's `config.yaml` read back from the
apiserver; it stops when the Pod goes. Each is forked from a process that imported `jmp`'s
entry point once (`tests.jmp_fork`: the imports are most of a start's CPU). So the
exporters that register with Jumpstarter's controller, report their status and serve
leases are the release's own, and the Exporters' conditions, `exporterStatus` and
`leaseRef` are what that controller writes. What is played is only the kubelet's part:
starting and stopping the command (Pod phases are not written).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.kubeget import find_json
from pool.model.jumpstarter import CONFIG_KEY, config_secret_name, run_command
from tests.jmp_fork import Forked, spawn

__all__ = ["DRIVERS", "DRIVER_NAMES", "ExporterProcesses", "reported_drivers", "running_exporters"]

# Drivers that start wherever Jumpstarter's release is installed (its mock power, a serial
# port on `loop://`): the template of the tests' pools whose exporters register.
DRIVERS = [
    {"name": "power", "type": "jumpstarter_driver_power.driver.MockPower"},
    {
        "name": "serial",
        "type": "jumpstarter_driver_pyserial.driver.PySerial",
        "config": {"url": "loop://"},
    },
]
ENDED_PHASES = ("Succeeded", "Failed")  # a Pod in either runs no container any more
# What an exporter of DRIVERS reports when it registers: the serial port has a `tcp` child.
DRIVER_NAMES = ["power", "serial", "tcp"]


def reported_drivers(devices: list[dict[str, Any]]) -> list[str]:
    """The driver names an Exporter's `status.devices` holds (what its exporter reported
    at registration; the root device has none), sorted."""
    names = ((d.get("labels") or {}).get("jumpstarter.dev/name") for d in devices)
    return sorted(name for name in names if name)


@dataclass
class ExporterProcesses:
    plane: ControlPlane
    namespace: str
    workdir: Path
    poll: float = 0.5
    running: dict[str, Forked] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)  # every instance a process ran for
    held: set[str] = field(default_factory=set)  # stopped on purpose: not started again
    paused: bool = False  # while set, nothing starts: a kubelet slow to start containers
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _config(self, exporter: str) -> str | None:
        found = find_json(self.plane, "secret", config_secret_name(exporter), "-n", self.namespace)
        if found is None:
            return None
        data = found.get("data") or {}
        return base64.b64decode(data[CONFIG_KEY]).decode() if CONFIG_KEY in data else None

    def _start(self, exporter: str) -> None:
        config = self._config(exporter)
        if config is None:
            return
        path = self.workdir / f"{exporter}.yaml"
        path.write_text(config)
        command = run_command()
        self.running[exporter] = spawn(
            [command[0], *command[1:-1], str(path)],
            log=self.workdir / f"{exporter}.log",
            env={**os.environ, "HOME": str(self.workdir)},
            cwd=Path.cwd(),
        )
        self.started.append(exporter)

    def _end(self, exporter: str, sig: signal.Signals = signal.SIGTERM) -> None:
        process = self.running.pop(exporter, None)
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        if not process.wait(timeout=5):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        process.close()

    def sync(self) -> None:
        """Start the command for each live instance Pod without one; stop those whose Pod
        is gone, going or ended (a Pod whose phase a test set Succeeded or Failed, as a
        kubelet reports a Pod whose containers have stopped)."""
        listed = find_json(self.plane, "pods", "-n", self.namespace)
        if listed is None:
            return
        pods = {
            p["metadata"]["name"]
            for p in listed["items"]
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ENDED_PHASES
        }
        with self._lock:
            for exporter in sorted(set(self.running) - pods):
                self._end(exporter)
            waiting = set() if self.paused else pods - set(self.running) - self.held
            for exporter in sorted(waiting):
                self._start(exporter)
            for exporter, process in list(self.running.items()):
                if process.exited():  # by itself: as a Pod that finished
                    self.running.pop(exporter).close()
                    self.held.add(exporter)

    def pause(self) -> None:
        """Start nothing from the next sync on, as a kubelet slow to start containers."""
        self.paused = True

    def resume(self) -> None:
        """Start what waits from the next sync on."""
        self.paused = False

    def kill(self, exporter: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """End one exporter as a crash would; it is not started again for the same Pod."""
        with self._lock:
            self.held.add(exporter)
            self._end(exporter, sig)

    def run(self) -> None:
        while not self._stop.wait(self.poll):
            self.sync()

    def close(self) -> None:
        """Stop every exporter, all at once (each may take seconds to unregister)."""
        self._stop.set()
        with self._lock:
            for process in self.running.values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            for exporter in list(self.running):
                self._end(exporter)


@contextlib.contextmanager
def running_exporters(
    plane: ControlPlane, namespace: str, workdir: Path
) -> Iterator[ExporterProcesses]:
    """`jmp run` for every instance Pod of `namespace` while the block runs."""
    workdir.mkdir(parents=True, exist_ok=True)
    processes = ExporterProcesses(plane, namespace, workdir)
    thread = threading.Thread(target=processes.run, daemon=True)
    thread.start()
    try:
        yield processes
    finally:
        processes.close()
        thread.join()
