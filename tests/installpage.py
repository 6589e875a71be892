"""docs/install.md as the tests read it: its marked blocks by name, and what they say.

The unit tests check that the page's commands name what the code uses, the render tests
build the page's own overlay, the image tests run its `docker run ... certs`, and the node
tier installs and uninstalls with its blocks (tests/node/install.py). The blocks that
install on the node of `make cluster` (the images built and imported there, Jumpstarter
by its operator) are a contributor's: docs/development.md holds them (`NODE_PAGE`), and
`page_of` says which page holds a block."""

from __future__ import annotations

import shlex
from pathlib import Path

from harness.deploy_render import OWN_OVERLAY, REPO
from tests.docpages import Command, commands

__all__ = [
    "EXAMPLES_APPLY",
    "EXAMPLES_DELETE",
    "INSTALL_CERT_MANAGER",
    "INSTALL_SELF_SIGNED",
    "INSTALL_WEBHOOK_BESIDE_OPERATOR",
    "INSTALL_WITHOUT_JUMPSTARTER",
    "NODE_INSTALL",
    "NODE_JUMPSTARTER",
    "NODE_MAIN_OPERATOR",
    "NODE_MAIN_OPERATOR_DISABLE",
    "NODE_MAIN_OPERATOR_WEBHOOK",
    "NODE_PAGE",
    "NODE_POOL",
    "OWN_OVERLAY_FILE",
    "PAGE",
    "UNINSTALL",
    "UNINSTALL_LEASED",
    "documented_certs_run",
    "page_of",
    "words",
]

PAGE = REPO / "docs" / "install.md"
NODE_PAGE = REPO / "docs" / "development.md"
INSTALL_SELF_SIGNED = "install-self-signed"
INSTALL_CERT_MANAGER = "install-cert-manager"
INSTALL_WITHOUT_JUMPSTARTER = "install-without-jumpstarter"
NODE_INSTALL = "node-install"
NODE_JUMPSTARTER = "node-jumpstarter"
NODE_POOL = "node-pool"
NODE_MAIN_OPERATOR = "node-main-operator"
NODE_MAIN_OPERATOR_DISABLE = "node-main-operator-disable"
NODE_MAIN_OPERATOR_WEBHOOK = "node-main-operator-webhook"
INSTALL_WEBHOOK_BESIDE_OPERATOR = "install-webhook-beside-operator"
EXAMPLES_APPLY = "examples-apply"
EXAMPLES_DELETE = "examples-delete"
UNINSTALL = "uninstall"
UNINSTALL_LEASED = "uninstall-leased"
OWN_OVERLAY_FILE = f"deploy/{OWN_OVERLAY}/kustomization.yaml"
# The blocks of NODE_PAGE: the node of `make cluster`, its images and Jumpstarter there.
NODE_BLOCKS = frozenset(
    {NODE_JUMPSTARTER, NODE_INSTALL, NODE_POOL, NODE_MAIN_OPERATOR, NODE_MAIN_OPERATOR_WEBHOOK}
)


def page_of(name: str) -> Path:
    """The page that holds the blocks marked `run=NAME`."""
    return NODE_PAGE if name in NODE_BLOCKS else PAGE


def words(command: Command) -> list[str]:
    return shlex.split(command.text, comments=True)


def documented_certs_run() -> tuple[list[str], str, str, list[str]]:
    """The page's `docker run` of the image's `certs` command: its options before the
    image, the mounted overlay (host path, container path), and the command's arguments."""
    (run,) = [
        w for w in map(words, commands(PAGE, INSTALL_SELF_SIGNED)) if w[:2] == ["docker", "run"]
    ]
    (image,) = [a for a in run if a.startswith("ghcr.io/")]
    options, args = run[2 : run.index(image)], run[run.index(image) + 1 :]
    host, _, target = options[options.index("-v") + 1].partition(":")
    return options, host.removeprefix("$PWD/"), target, args
