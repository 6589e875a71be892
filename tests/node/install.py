"""The product installed on the node cluster by the documentation's own commands, and
uninstalled by them.

docs/development.md's blocks `node-jumpstarter` (Jumpstarter 0.9.0 by its own operator),
`node-install` and `node-pool`, and docs/install.md's `examples-apply`, run word for word
(tests/docpages.py; `tests.installpage.page_of` says which page holds a block), in one
shell, from a copy of the checkout as a reader has it; that copy's `.cluster` is this
cluster's folder (the page's is `make cluster`'s, the repository's `.cluster`).
`uninstall()` runs install.md's `examples-delete` and `uninstall`, `uninstall_leased()`
its step for instances a lease still held. Each command's time is kept for the figures."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.deploy_render import REPO
from harness.images import product_image
from harness.kubeget import get_json
from harness.node import NodeCluster
from tests.docpages import Ran, Session, commands
from tests.installpage import (
    EXAMPLES_APPLY,
    EXAMPLES_DELETE,
    NODE_INSTALL,
    NODE_JUMPSTARTER,
    NODE_POOL,
    PAGE,
    UNINSTALL,
    UNINSTALL_LEASED,
    page_of,
)

NAMESPACE = "virtualtarget-system"
WEBHOOK, RECONCILER = "virtualtarget-webhook", "virtualtarget-reconciler"
DEPLOYMENTS = (WEBHOOK, RECONCILER)
ROLLOUT_TIMEOUT_S = 180
# What the page's commands write into the checkout (certificates into deploy/, and what
# kustomize reads beside them): copied; everything else of the checkout is linked.
COPIED = ("deploy", "crds", "examples")
NOT_LINKED = (".git", ".cluster", ".run", *COPIED)


@dataclass
class Install:
    cluster: NodeCluster
    tree: Path  # the reader's checkout the page's commands ran in
    shell: Session
    image: str
    installed: list[Ran] = field(default_factory=list)
    blocks: dict[str, list[Ran]] = field(default_factory=dict)  # what each block ran
    started: float = 0.0  # time.monotonic() at the first command
    pool_applied: float = 0.0  # time.monotonic() once `node-pool` ran

    @property
    def release(self) -> Path:
        """The copy of the release's kustomize/ the page's `node-install` applied."""
        return self.tree / ".run" / "release"

    @property
    def overlay(self) -> Path:
        """The release's self-signed overlay, holding the certificates `certs` made."""
        return self.release / "deploy" / "overlays" / "self-signed"

    def kubectl(self, *args: str, **kwargs: Any) -> Any:
        return self.cluster.kubectl(*args, **kwargs)

    def json(self, *args: str) -> Any:
        """`kubectl ARGS -o json`: a `get` it can answer in process (`harness.kubeget`)."""
        if args[:1] == ("get",):
            return get_json(self.cluster, *args[1:])
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def pods(self, deployment: str) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/name={deployment}"
        items: list[dict[str, Any]] = self.json("get", "pods", "-n", NAMESPACE, "-l", selector)[
            "items"
        ]
        return items

    def rollout_status(self, deployment: str) -> None:
        self.kubectl(
            "rollout", "status", f"deployment/{deployment}", "-n", NAMESPACE,
            f"--timeout={ROLLOUT_TIMEOUT_S}s", timeout=ROLLOUT_TIMEOUT_S + 10,
        )  # fmt: skip

    def events(self, reason: str) -> list[dict[str, Any]]:
        """The install namespace's core Events with `reason` (the kubelet's probe
        failures are `Unhealthy`)."""
        listed = self.json("get", "events", "-n", NAMESPACE, "--field-selector", f"reason={reason}")
        items: list[dict[str, Any]] = listed["items"]
        return items

    def uninstall(self) -> list[Ran]:
        """The page's uninstall on the node: the examples, the pools, the classes, the
        overlay (Jumpstarter, the operator's, stays)."""
        ran = self.shell.run_all(commands(PAGE, EXAMPLES_DELETE))
        # The page's uninstall names the overlay as a release has it, from its kustomize/.
        checkout, self.shell.cwd = self.shell.cwd, self.release
        try:
            ran += self.shell.run_all(commands(PAGE, UNINSTALL))
        finally:
            self.shell.cwd = checkout
        return ran

    def uninstall_leased(self) -> list[Ran]:
        """The page's last uninstall step: the instances a lease held when the overlay
        went lose the lease protection once no lease holds them."""
        ran: list[Ran] = self.shell.run_all(commands(PAGE, UNINSTALL_LEASED))
        return ran

    def run(self, block: str) -> None:
        self.blocks[block] = self.shell.run_all(commands(page_of(block), block))
        self.installed += self.blocks[block]


def readers_checkout(work: Path, cluster: NodeCluster) -> Path:
    """The checkout as a reader has it, where the page's commands may write."""
    stamp, project = REPO / ".venv" / ".installed", REPO / "pyproject.toml"
    # The page's `make image` would otherwise reinstall the venv from this copy.
    assert stamp.stat().st_mtime >= project.stat().st_mtime, "the venv is stale: run `make venv`"
    tree = work / "checkout"
    tree.mkdir()
    for name in COPIED:
        shutil.copytree(REPO / name, tree / name, symlinks=True)
    # `make release` writes the real checkout's dist/, which the page reads back.
    linked = {p.name for p in REPO.iterdir()} - set(NOT_LINKED) | {".cache", "dist"}
    for name in sorted(linked):
        (tree / name).symlink_to(REPO / name)
    (tree / ".cluster").symlink_to(cluster.workdir)
    # Not a local run's certificates (git-ignored, copied with deploy/): the page makes them.
    shutil.rmtree(tree / "deploy" / "overlays" / "self-signed" / "certs", ignore_errors=True)
    (tree / "deploy" / "overlays" / "self-signed" / "ca-bundle.yaml").unlink(missing_ok=True)
    return tree


def readers_shell(tree: Path, work: Path) -> Session:
    """A shell in the checkout; kubectl's discovery cache in the work folder rather than
    in the home folder of whoever runs the tests."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return Session(cwd=tree, env=env | {"KUBECACHEDIR": str(work / "kubectl-cache")})


def install(cluster: NodeCluster, work: Path) -> Install:
    """The page's node install (Jumpstarter by its operator, then this product, then the
    node pool) and the examples, run as written; then both Deployments rolled out."""
    tree = readers_checkout(work, cluster)
    shell = readers_shell(tree, work)
    done = Install(cluster, tree, shell, product_image(), started=time.monotonic())
    for block in (NODE_JUMPSTARTER, NODE_INSTALL, NODE_POOL):
        done.run(block)
    done.pool_applied = time.monotonic()
    done.run(EXAMPLES_APPLY)
    for deployment in DEPLOYMENTS:
        done.rollout_status(deployment)
    return done


def figure(title: str, ran: list[Ran]) -> str:
    """One line: each command's first words and its time, and the total."""
    steps = ", ".join(f"`{' '.join(r.run.split()[:4])}` {r.seconds:.1f} s" for r in ran)
    return f"{title} ({sum(r.seconds for r in ran):.1f} s): {steps}"
