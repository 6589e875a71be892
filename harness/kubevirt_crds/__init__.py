"""KubeVirt's VirtualMachine and VirtualMachineInstance CRDs as its virt-operator installs
them, for the loopback tiers, which run no KubeVirt: `main.go` beside this file, run inside
KubeVirt's v1.7.0 module (`harness.kubevirt_build.source`), prints the CRDs that
`pkg/virt-operator/resource/generate/components` makes (their schemas come from
`kubevirt.io/api`). Cached by KubeVirt's version and the program's digest.

    python -m harness.kubevirt_crds     # print them (JSON)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness.gobuild import build_flags
from harness.kubevirt_build import CACHE, VERSION, go_env, source

__all__ = ["crds"]

PROGRAM = Path(__file__).with_name("main.go")
_TOOL = "tools/virtualtarget-crds"  # where the program runs inside KubeVirt's module


def crds(cache: Path = CACHE) -> list[dict[str, Any]]:
    """The two CRDs, VirtualMachine first (built once per version and program)."""
    digest = hashlib.sha256(PROGRAM.read_bytes()).hexdigest()[:12]
    found = cache / f"crds-{VERSION}-{digest}.json"
    if not found.is_file():
        tree = source(cache)
        (tree / _TOOL).mkdir(parents=True, exist_ok=True)
        shutil.copy(PROGRAM, tree / _TOOL / "main.go")
        printed = subprocess.run(
            ["go", "run", *build_flags(), f"./{_TOOL}"],
            cwd=tree,
            env=go_env(),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        json.loads(printed)  # whole, before it is kept
        partial = found.with_suffix(".tmp")
        partial.write_text(printed)
        partial.replace(found)
    # Go's encoding writes the empty status and creation time too: not for an apply.
    loaded: list[dict[str, Any]] = json.loads(found.read_text())
    for crd in loaded:
        crd.pop("status", None)
        crd["metadata"].pop("creationTimestamp", None)
    return loaded
