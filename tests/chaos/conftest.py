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

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import Jumpstarter, install_crds, running_jumpstarter
from tests import records
from tests.exporters import ExporterProcesses, running_exporters


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chaos)
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def recovery(request: pytest.FixtureRequest) -> Callable[[str, float], None]:
    """Record how long something took to recover (printed at the end of the run by the
    root conftest, from `tests.records`)."""

    def record(what: str, seconds: float) -> None:
        records.record("recovery", test=request.node.name, what=what, seconds=seconds)

    return record


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own (the tests restart its processes), with an
    audit log of every write and Jumpstarter's release's own `jumpstarter.dev` CRDs (its
    Lease among them), as its operator installs them."""
    with running_control_plane(audit=True) as control_plane:
        install_crds(control_plane)
        yield control_plane


@pytest.fixture
def namespace(plane: ControlPlane) -> str:
    name = f"c-{secrets.token_hex(4)}"
    plane.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def jumpstarter(plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Jumpstarter]:
    """Jumpstarter's released 0.9.0 controller and router serving this test's namespace (the
    release's CRDs, installed with the plane, applied again first): the controller issues
    the Exporters' credentials and assigns, pends or ends the namespace's Leases."""
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
