"""Faults through the real control plane: etcd, kube-apiserver, the webhook and the
reconciler run as processes, and the tests kill, restart, pause and compact them.

Every test here is marked `chaos` (and `e2e`: it needs the binaries of `make
control-plane`). Each asserts the outcome and waits for it within a bound (a liveness
bound, so a broken product fails instead of hanging); how long recovery took is recorded
with `recovery` and printed in a table at the end of the run.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.standin import CredentialStandIn
from tests.e2e.objects import install_lease_crd, playing_credentials

_FIGURES: list[tuple[str, str, float]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chaos)
            item.add_marker(pytest.mark.e2e)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("chaos: recovery figures")
    for test, what, seconds in _FIGURES:
        terminalreporter.write_line(f"{test:<58} {what:<52} {seconds:7.2f} s")


@pytest.fixture
def recovery(request: pytest.FixtureRequest) -> Callable[[str, float], None]:
    """Record how long something took to recover (printed at the end of the run)."""

    def record(what: str, seconds: float) -> None:
        _FIGURES.append((request.node.name, what, seconds))

    return record


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own (the tests restart its processes), with an
    audit log of every write and Jumpstarter's Lease CRD."""
    with running_control_plane(audit=True) as control_plane:
        install_lease_crd(control_plane)
        yield control_plane


@pytest.fixture
def namespace(plane: ControlPlane) -> str:
    name = f"c-{secrets.token_hex(4)}"
    plane.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def standin(plane: ControlPlane, namespace: str) -> Iterator[CredentialStandIn]:
    """Jumpstarter's credential step, played for this test's namespace (it retries through
    outages, as a controller would)."""
    with playing_credentials(plane, namespace) as issuer:
        yield issuer
