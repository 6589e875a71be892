"""Fixtures that run tests against a real kube-apiserver and etcd on loopback, and
Jumpstarter's released controller and router.

Every test in this folder is marked `e2e`. The binaries come from `make control-plane` and
`make jumpstarter`; when they are missing the session fails with the command to run, it
never skips. The `jumpstarter.dev` kinds are the release's own CRDs. A test that needs
Jumpstarter (an Exporter's credentials, its Registered and Online conditions, a Lease
assigned, released or ended) takes `ns`: a fresh namespace that Jumpstarter's own
controller serves (one per test, each in a network namespace of its own:
`harness.jumpstarter`); `exporters` runs each instance's `jmp run` there.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import Jumpstarter, JumpstarterSupply
from harness.stack import (
    WebhookServer,
    reconciler_args,
    register_webhooks,
    running_webhook,
    unregister_webhooks,
)
from tests.exporters import ExporterProcesses, running_exporters


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """One etcd + kube-apiserver for the session, with the generated CRDs installed and
    Jumpstarter's release CRDs for its kinds."""
    with running_control_plane(jumpstarter=True) as plane:
        yield plane


@pytest.fixture(scope="session")
def jumpstarters(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JumpstarterSupply]:
    supply = JumpstarterSupply(control_plane, tmp_path_factory.mktemp("jumpstarter"))
    yield supply
    supply.close()


@pytest.fixture
def jumpstarter(jumpstarters: JumpstarterSupply) -> Iterator[Jumpstarter]:
    """A fresh namespace served by Jumpstarter's own 0.9.0 controller and router."""
    with jumpstarters.take() as running:
        yield running


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A fresh namespace for one test (never deleted: no namespace controller runs)."""
    name = f"t-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def ns(jumpstarter: Jumpstarter) -> str:
    """The namespace Jumpstarter's controller serves (`jumpstarter`)."""
    return jumpstarter.namespace


@pytest.fixture
def exporters(control_plane: ControlPlane, ns: str, tmp_path: Path) -> Iterator[ExporterProcesses]:
    """Jumpstarter 0.9.0's `jmp run` for each instance Pod of `ns` (tests.exporters)."""
    with running_exporters(control_plane, ns, tmp_path / "exporters") as processes:
        yield processes


@pytest.fixture(scope="module")
def webhook(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebhookServer]:
    """The webhook served on loopback and registered from the rendered deploy manifests,
    for the tests of one module (taken off the apiserver after them)."""
    with running_webhook(control_plane, tmp_path_factory.mktemp("webhook")) as server:
        register_webhooks(control_plane, server)
        yield server
        unregister_webhooks(control_plane)


@pytest.fixture
def reconcile(control_plane: ControlPlane, ns: str, tmp_path: Path) -> Iterator[Callable[[], Path]]:
    """Start `virtualtarget reconcile` for the namespace; returns its log file."""
    started: list[subprocess.Popen[bytes]] = []

    def run() -> Path:
        log = tmp_path / f"reconciler-{len(started)}.log"
        cli = reconciler_args(control_plane.kubeconfig)
        args = [*cli, "--namespace", ns, "--no-leader-election"]
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "virtualtarget.cli", *args],
                stdout=subprocess.DEVNULL,
                stderr=log.open("ab"),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        )
        return log

    yield run
    for popen in started:
        popen.send_signal(signal.SIGKILL)
        popen.wait()
