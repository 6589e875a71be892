"""Time the whole `make crds` pipeline: a fresh process, parse, generate, write.

Cold: an empty output tree (every model, CRD and doc written). Warm: the same tree
again (nothing changes, nothing is written). Target: under 10 s on 2 cores.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5
TARGET_S = 10.0


def _run(root: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "virtualtarget.cli", "crds", "--root", str(root)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> str:
    cold, warm = [], []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(ROOT / "schemas", Path(tmp) / "schemas")
            cold.append(_run(Path(tmp)))
            warm.append(_run(Path(tmp)))
    rows = [
        f"| {name} | {statistics.median(xs):.2f} | {max(xs):.2f} |"
        for name, xs in (("cold (all files written)", cold), ("warm (nothing changes)", warm))
    ]
    verdict = "meets" if max(cold) < TARGET_S else "MISSES"
    return "\n".join(
        [
            "## make crds (`python -m bench crds`)",
            "",
            f"{RUNS} runs each, a fresh process per run; {verdict} the {TARGET_S:.0f} s target.",
            "",
            "| run | median s | max s |",
            "| --- | --- | --- |",
            *rows,
        ]
    )
