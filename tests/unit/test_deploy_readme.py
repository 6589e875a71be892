"""The README's "Install in a cluster" commands work as written (on a copy of the tree)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import yaml

from virtualtarget.cli import main
from virtualtarget.deploy_render import DEPLOY, OVERLAYS, REPO, kubectl


def install_commands() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Install in a cluster", 1)[1].split("\n## ", 1)[0]
    block = "\n".join(line[4:] for line in section.splitlines() if line.startswith("    "))
    return [shlex.split(c) for c in re.sub(r"\\\n\s*", " ", block).splitlines() if c.strip()]


def test_each_overlay_is_applied_by_one_documented_command() -> None:
    applied = [c[-1] for c in install_commands() if c[:3] == ["kubectl", "apply", "-k"]]
    assert applied == [f"deploy/overlays/{name}" for name in OVERLAYS]


def documented_certs_run() -> tuple[list[str], str, str, list[str]]:
    """The README's `docker run` of the image's `certs` command: its options before the
    image, the mounted overlay (host path, container path), and the command's arguments."""
    (run,) = [c for c in install_commands() if c[:2] == ["docker", "run"]]
    (image,) = [a for a in run if a.startswith("ghcr.io/")]
    options, args = run[2 : run.index(image)], run[run.index(image) + 1 :]
    host, _, target = options[options.index("-v") + 1].partition(":")
    return options, host.removeprefix("$PWD/"), target, args


def test_documented_self_signed_steps_render(tmp_path: Path) -> None:
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    shutil.copytree(REPO / "crds", tmp_path / "crds")
    _, host, target, args = documented_certs_run()
    assert host == "deploy/overlays/self-signed" and args[0] == "certs"
    overlay = tmp_path / host
    # The container's paths are the mounted overlay's.
    assert main([a.replace(target, str(overlay)) for a in args]) == 0

    done = subprocess.run([kubectl(), "kustomize", overlay], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kinds = {o["kind"] for o in yaml.safe_load_all(done.stdout) if o}
    assert {"Secret", "MutatingWebhookConfiguration", "Deployment"} <= kinds
