"""The README's "The product on the node" commands name what the code uses: the archive
`make image` writes, the node's containerd socket, the tests' Lease CRD, the `certs`
arguments of "Install in a cluster", and the overlay."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.e2e.objects import LEASE_CRD
from tests.unit.test_deploy_readme import documented_certs_run
from virtualtarget.cluster import DEFAULT_WORKDIR
from virtualtarget.controlplane import REPO_ROOT
from virtualtarget.images import CACHE


def _commands() -> list[list[str]]:
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("### The product on the node", 1)[1].split("\n#", 1)[0]
    block = "\n".join(line[4:] for line in section.splitlines() if line.startswith("    "))
    lines = re.sub(r"\\\n\s*", " ", block).splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def test_the_node_install_commands_name_what_the_code_uses() -> None:
    commands = _commands()
    socket = _relative(DEFAULT_WORKDIR / "containerd" / "containerd.sock")
    archive = _relative(CACHE / "virtualtarget.tar")
    _, host, target, documented = documented_certs_run()
    assert commands[:2] == [
        ["make", "image"],
        ["ctr", "--address", socket, "-n", "k8s.io", "images", "import", archive],
    ]
    # The Lease CRD from the tests' copy, printed as JSON for kubectl.
    (lease,) = [c for c in commands if c[:2] == [".venv/bin/python", "-c"]]
    assert lease[3:] == ["|", "kubectl", "apply", "-f", "-"]
    printed = subprocess.run(
        [sys.executable, "-c", lease[2]], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert json.loads(printed.stdout) == LEASE_CRD
    # The documented `docker run ... certs`, with the overlay's own path for the mount's.
    assert [".venv/bin/virtualtarget", *(a.replace(target, host) for a in documented)] in commands
    assert [c for c in commands if c[:3] == ["kubectl", "apply", "-k"]] == [
        ["kubectl", "apply", "-k", host]
    ]
