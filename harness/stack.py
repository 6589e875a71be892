"""The product's processes around a loopback control plane: webhook and reconciler.

Shared by `harness.dev` (`make run`) and the end-to-end tests, so both exercise
the same start-up: certificates from `certs/`, the webhook served over TLS by its own
CLI, and registration from the rendered `deploy/` webhook configurations with the
Service reference swapped for the loopback URL.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from certs.authority import CertificateSet, ensure_certificates
from harness.controlplane import ControlPlane, ControlPlaneError
from harness.deploy_render import (
    WEBHOOK_CONFIGURATION_KINDS,
    WEBHOOK_NAMESPACE,
    WEBHOOK_SERVICE,
    render_overlay,
)
from scrape.serving import SERVING_METRICS, SERVING_PROBES, SERVING_WEBHOOK

__all__ = [
    "ChildProcess",
    "ReconcilerProcess",
    "WebhookServer",
    "reconciler_args",
    "register_webhooks",
    "running_reconciler",
    "running_webhook",
    "served_url",
    "unregister_webhooks",
]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
START_TIMEOUT_S = 30.0


# The class's `signal` method hides the module in its body: annotations name this.
Signal = signal.Signals


@dataclass
class ChildProcess:
    """A product process started with the `virtualtarget` CLI, its output in a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]

    @classmethod
    def start(
        cls,
        name: str,
        args: Sequence[str],
        log_dir: Path,
        *,
        module: str = "virtualtarget.cli",
        env: Mapping[str, str] | None = None,
    ) -> ChildProcess:
        """Run `python -m MODULE ARGS` (the `virtualtarget` CLI by default), with `env`
        added to this process's environment."""
        log = (log_dir / f"{name}.log").open("wb")
        popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **env} if env is not None else None,
        )
        return cls(name, popen, log)

    def log_tail(self, lines: int = 10) -> str:
        self.log.flush()
        return "\n  ".join(Path(self.log.name).read_text(errors="replace").splitlines()[-lines:])

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise ControlPlaneError(
                f"{self.name} exited with code {self.popen.returncode}; "
                f"last lines of {self.log.name}:\n  {self.log_tail()}"
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def stop(self, timeout: float = 10, sig: Signal | None = None) -> None:
        """Signal it (SIGTERM unless `sig`), wait `timeout` seconds, then SIGKILL."""
        self.signal(sig or signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.popen.wait()
        self.log.close()


@dataclass
class WebhookServer:
    process: ChildProcess
    url: str
    certificates: CertificateSet


def _wait_healthy(server: WebhookServer) -> None:
    context = ssl.create_default_context(cadata=server.certificates.ca_pem.decode())
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        server.process.check_alive()
        try:
            with urllib.request.urlopen(f"{server.url}/healthz", timeout=2, context=context):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise ControlPlaneError(
        f"webhook not healthy after {START_TIMEOUT_S:.0f}s; see {server.process.log.name}"
    )


@contextlib.contextmanager
def running_webhook(
    plane: ControlPlane,
    workdir: Path,
    *,
    kubeconfig: Path | None = None,
    extra: Sequence[str] = (),
) -> Iterator[WebhookServer]:
    """Serve the webhook on a free loopback port with certificates kept in `workdir`,
    acting as the admin unless another `kubeconfig` is given; `extra` are more flags
    (`--allowed-image-prefixes=...`)."""
    certificates = ensure_certificates(
        workdir / "certs", WEBHOOK_SERVICE, WEBHOOK_NAMESPACE, LOOPBACK_HOSTS
    )
    process = ChildProcess.start(
        "webhook",
        [
            "webhook",
            f"--cert-dir={certificates.directory}",
            "--host=127.0.0.1",
            "--port=0",  # the kernel picks a free port at bind time; the log names it
            f"--kubeconfig={kubeconfig or plane.kubeconfig}",
            *extra,
        ],
        workdir,
    )
    url = served_url(Path(process.log.name), SERVING_WEBHOOK, "https", process.popen)
    server = WebhookServer(process, url, certificates)
    try:
        _wait_healthy(server)
        yield server
    finally:
        process.stop(sig=signal.SIGINT)  # at once: SIGTERM drains (webhook.server)


def register_webhooks(plane: ControlPlane, server: WebhookServer) -> None:
    """Apply the rendered webhook configurations, pointed at the loopback server."""
    objects = render_overlay(
        "self-signed", webhook_url=server.url, ca_bundle=server.certificates.ca_pem
    )
    configurations = [o for o in objects if o.get("kind") in WEBHOOK_CONFIGURATION_KINDS]
    if len(configurations) != len(WEBHOOK_CONFIGURATION_KINDS):
        raise ControlPlaneError(
            f"deploy: expected {len(WEBHOOK_CONFIGURATION_KINDS)} webhook configurations "
            f"in the self-signed overlay, found {len(configurations)}"
        )
    document = {"apiVersion": "v1", "kind": "List", "items": configurations}
    plane.kubectl("apply", "-f", "-", input=json.dumps(document))
    _wait_until_called(plane)


def _wait_until_called(plane: ControlPlane) -> None:
    """Registration reaches the apiserver's admission chain asynchronously: wait until a
    dry-run create comes back with the webhook's warning about a class that is absent."""
    probe = {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "ExporterSet",
        "metadata": {"name": "registration-probe", "namespace": "default"},
        "spec": {
            "virtualTargetClassName": "registration-probe-absent-class",
            "selector": {"matchLabels": {"probe": "registration"}},
        },
    }
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        result = plane.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
        )
        if "registration-probe-absent-class" in result.stderr:
            return
        time.sleep(0.2)
    raise ControlPlaneError(
        f"the apiserver did not call the registered webhook within {START_TIMEOUT_S:.0f}s"
    )


def unregister_webhooks(plane: ControlPlane) -> None:
    """Remove the webhook configurations: a registered webhook that no longer answers
    would fail every later request (failurePolicy Fail)."""
    plane.kubectl(
        "delete",
        "mutatingwebhookconfigurations,validatingwebhookconfigurations",
        "-l",
        "app.kubernetes.io/part-of=virtualtarget",
        "--ignore-not-found",
    )


@dataclass
class ReconcilerProcess(ChildProcess):
    """The reconciler, with where its probes (HTTP) and metrics (HTTPS) are served."""

    @functools.cached_property
    def health_url(self) -> str:
        return served_url(Path(self.log.name), SERVING_PROBES, "http", self.popen)

    @functools.cached_property
    def metrics_url(self) -> str:
        return served_url(Path(self.log.name), SERVING_METRICS, "https", self.popen)


def reconciler_args(kubeconfig: Path) -> list[str]:
    """The reconciler's arguments on loopback. Probes and metrics listen on port 0: the
    kernel picks a free port at bind time (a port merely found free a moment before can
    be taken in between); `served_url` reads the port from the log."""
    return [
        "reconcile",
        f"--kubeconfig={kubeconfig}",
        "--provisioner=qemu.jumpstarter.dev",
        "--health-probe-bind-address=127.0.0.1:0",
        "--metrics-bind-address=127.0.0.1:0",
    ]


def served_url(
    log: Path,
    line: str,
    scheme: str,
    popen: subprocess.Popen[bytes] | None = None,
    *,
    after: int = 0,
    timeout: float = START_TIMEOUT_S,
) -> str:
    """The base URL of the server whose start the reconciler logs as `line`
    (`SERVING_PROBES`, `SERVING_METRICS`), read from `log` past byte `after`; waits for
    the line while `popen` runs."""
    pattern = re.compile(re.escape(line).replace("%d", r"(\d+)").replace("%s", r".*?"))
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(FileNotFoundError), log.open("rb") as file:
            file.seek(after)
            found = pattern.search(file.read().decode(errors="replace"))
            if found:
                return f"{scheme}://127.0.0.1:{found.group(1)}"
        if popen is not None and popen.poll() is not None:
            raise ControlPlaneError(
                f"the reconciler exited with code {popen.returncode} before logging "
                f"{line!r}; see {log}"
            )
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"no {line!r} in {log} within {timeout:.0f}s")
        time.sleep(0.05)


@contextlib.contextmanager
def running_reconciler(
    plane: ControlPlane,
    workdir: Path,
    *,
    name: str = "reconciler",
    kubeconfig: Path | None = None,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[ReconcilerProcess]:
    """Run `virtualtarget reconcile` against the loopback control plane (as the admin
    unless another `kubeconfig` is given; `env` added to its environment)."""
    args = reconciler_args(kubeconfig or plane.kubeconfig)
    started = ChildProcess.start(name, [*args, *extra], workdir, env=env)
    process = ReconcilerProcess(started.name, started.popen, started.log)
    try:
        yield process
    finally:
        process.stop()
