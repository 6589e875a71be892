"""docs/install.md's examples blocks, run as written from the repository against the
loopback control plane, with the webhook registered and the reconciler running:
`kubectl apply -f examples/` makes a pool, and `kubectl delete -f examples/` takes it away
again, each exiting 0 (the set's file sorts before its class's)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.controlplane import REPO_ROOT, ControlPlane
from harness.stack import (
    register_webhooks,
    running_reconciler,
    running_webhook,
    unregister_webhooks,
)
from pool.model.keys import instance_selector
from tests.docpages import Session, commands
from tests.e2e.examples import assert_examples_applied
from tests.e2e.objects import wait_for
from tests.installpage import EXAMPLES_APPLY, EXAMPLES_DELETE, PAGE

NAMESPACE = "default"  # the examples' own
POOL = "fedora-x86"


@pytest.fixture(scope="module")
def product(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    with running_webhook(control_plane, tmp_path_factory.mktemp("webhook")) as server:
        register_webhooks(control_plane, server)
        try:
            with running_reconciler(control_plane, tmp_path_factory.mktemp("reconciler")):
                yield
        finally:
            unregister_webhooks(control_plane)


def reader_shell(plane: ControlPlane, tmp_path: Path) -> Session:
    """A shell in the repository whose kubectl is the built one, on this control plane."""
    kubectl = plane.binaries["kubectl"]
    return Session(
        cwd=REPO_ROOT,
        env=dict(os.environ)
        | {
            "KUBECONFIG": str(plane.kubeconfig),
            "PATH": f"{kubectl.parent}{os.pathsep}{os.environ['PATH']}",
            "KUBECACHEDIR": str(tmp_path / "kubectl-cache"),
        },
    )


def pool(plane: ControlPlane) -> list[str]:
    listed = plane.kubectl(
        "get", "exporters.jumpstarter.dev", "-n", NAMESPACE, "-l", instance_selector(POOL),
        "-o", "json",
    )  # fmt: skip
    return [e["metadata"]["name"] for e in json.loads(listed.stdout)["items"]]


def test_the_examples_make_a_pool_and_go_away_with_one_command_each(
    control_plane: ControlPlane, product: None, tmp_path: Path
) -> None:
    shell = reader_shell(control_plane, tmp_path)
    (applied,) = shell.run_all(commands(PAGE, EXAMPLES_APPLY))
    assert_examples_applied(applied, NAMESPACE)
    instances = wait_for("the pool's instances", lambda: pool(control_plane))
    try:
        (deleted,) = shell.run_all(commands(PAGE, EXAMPLES_DELETE))
        assert deleted.stderr == ""
        assert [line.split(" ")[0] for line in deleted.stdout.splitlines()] == [
            "exporter.jumpstarter.dev",
            "exporterset.virtualtarget.jumpstarter.dev",
            "virtualtargetclass.virtualtarget.jumpstarter.dev",
        ]
    finally:
        # No garbage collector runs here: the pool's Exporters outlive their set.
        control_plane.kubectl(
            "delete", "exporters.jumpstarter.dev", "-n", NAMESPACE, *instances, "--wait=false"
        )
    leftovers = control_plane.kubectl(
        "get", "exportersets,virtualtargetclasses", "-n", NAMESPACE, "-o", "name"
    )
    assert leftovers.stdout == ""
