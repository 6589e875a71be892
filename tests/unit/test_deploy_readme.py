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


def test_documented_self_signed_steps_render(tmp_path: Path) -> None:
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    shutil.copytree(REPO / "crds", tmp_path / "crds")
    (certs,) = [c for c in install_commands() if c[0].endswith("virtualtarget")]
    rebased = [str(tmp_path / a) if a.startswith("deploy/") else a for a in certs[1:]]
    assert main(rebased) == 0

    overlay = tmp_path / "deploy" / "overlays" / "self-signed"
    done = subprocess.run([kubectl(), "kustomize", overlay], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kinds = {o["kind"] for o in yaml.safe_load_all(done.stdout) if o}
    assert {"Secret", "MutatingWebhookConfiguration", "Deployment"} <= kinds
