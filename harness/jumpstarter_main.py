"""Jumpstarter main's own exporter-set controller, run against a control plane.

The binary is `harness.jumpstarter_build`'s build of main (`make jumpstarter`). It is
started as Jumpstarter main's operator starts it (`createExporterSetDeployment`):
`--provisioner=<name> --leader-elect`, with `NAMESPACE` set to the one namespace it
serves. Its probes and metrics listen on free loopback ports instead of `:8081` and `0`,
as the tests bind loopback only, and it reaches the apiserver through `KUBECONFIG`
(controller-runtime's `GetConfigOrDie` reads it). It reads its ExporterSets and
VirtualTargetClasses through its own Go types: the plane must serve Jumpstarter's CRDs of
those kinds (the build's `crds/`), not this project's.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from harness.controlplane import ControlPlane, ControlPlaneError, free_port
from harness.jumpstarter_build import MAIN_SOURCE, built
from harness.stack import START_TIMEOUT_S, ChildProcess

__all__ = ["NAME", "install_crds", "running_exporter_set_controller"]

NAME = "exporter-set-controller"  # the binary, and the process's log name


def install_crds(plane: ControlPlane) -> None:
    """Jumpstarter main's ExporterSet and VirtualTargetClass CRDs, as its operator installs
    them (in place of any other definition of those kinds)."""
    plane.install_crds(built(MAIN_SOURCE).crds)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_exporter_set_controller(
    plane: ControlPlane,
    namespace: str,
    workdir: Path,
    *,
    provisioner: str = "qemu.jumpstarter.dev",
    kubeconfig: Path | None = None,
) -> Iterator[ChildProcess]:
    """Main's exporter-set controller serving `namespace` (as the admin unless another
    `kubeconfig` is given), its readiness probe answering when yielded; stopped on exit.
    Its leadership is not awaited: another holder of its election Lease delays it."""
    workdir.mkdir(parents=True, exist_ok=True)
    probes = f"127.0.0.1:{free_port()}"
    args = [
        f"--provisioner={provisioner}",
        "--leader-elect",
        f"--health-probe-bind-address={probes}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
    ]
    log = (workdir / f"{NAME}.log").open("wb")
    popen = subprocess.Popen(
        [str(built(MAIN_SOURCE).binary(NAME)), *args],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={
            **os.environ,
            "NAMESPACE": namespace,
            "KUBECONFIG": str(kubeconfig or plane.kubeconfig),
        },
    )
    process = ChildProcess(f"Jumpstarter main's {NAME}", popen, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(f"http://{probes}/readyz"):
            process.check_alive()
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{process.name} not ready; see {log.name}")
            time.sleep(0.2)
        yield process
    finally:
        process.stop()
