"""Fixtures that run tests against a real kube-apiserver and etcd on loopback.

Every test in this folder is marked `e2e`. The binaries come from `make control-plane`;
when they are missing the session fails with the command to run, it never skips.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from virtualtarget.controlplane import ControlPlane, running_control_plane


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """One etcd + kube-apiserver for the session, with the generated CRDs installed."""
    with running_control_plane() as plane:
        yield plane


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A fresh namespace for one test (never deleted: no namespace controller runs)."""
    name = f"t-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", name)
    return name
