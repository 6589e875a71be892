"""Faults through the real control plane: etcd, kube-apiserver, the webhook and the
reconciler run as processes, and the tests kill, restart, pause and compact them. Where a
pool needs its credentials, Jumpstarter's released 0.9.0 controller serves the test's
namespace (`jumpstarter`), through the faults as a cluster's would.

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
from harness.jumpstarter import Jumpstarter, running_jumpstarter
from tests.e2e.objects import install_lease_crd
from tests.exporters import ExporterProcesses, running_exporters

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
def jumpstarter(plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Jumpstarter]:
    """Jumpstarter's released 0.9.0 controller and router serving this test's namespace, its
    release's `jumpstarter.dev` CRDs installed on the plane first (in place of the Lease
    CRD above): the controller issues the Exporters' credentials."""
    with running_jumpstarter(plane, namespace, tmp_path / "jumpstarter") as running:
        yield running


@pytest.fixture
def exporters(
    plane: ControlPlane, jumpstarter: Jumpstarter, tmp_path: Path
) -> Iterator[ExporterProcesses]:
    """Jumpstarter 0.9.0's `jmp run` for each instance Pod of the namespace
    (tests.exporters): they register with `jumpstarter`'s controller."""
    with running_exporters(plane, jumpstarter.namespace, tmp_path / "exporters") as processes:
        yield processes
