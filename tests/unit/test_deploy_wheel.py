"""The package as the image installs it: the Dockerfile's build context, no extras.

Builds the wheel from exactly what the Dockerfile copies, installs it into a fresh venv
as the image does (the runtime dependencies from requirements.lock, hashes checked,
then the wheel offline: the lock must be complete; no extras) and runs from there the commands
the Deployments and people run. Marked `slow` (a venv and the runtime dependencies
from PyPI: about 40 s, 30 s with a warm pip cache); `make test` runs it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.deploy_render import REPO
from harness.lock import LOCK
from tests.unit.test_deploy_dockerfile import copied_sources

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SCENARIO = REPO / "examples" / "scenarios" / "office-hours.yaml"


def run(args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv holding the wheel and its runtime dependencies."""
    root = tmp_path_factory.mktemp("wheel")
    context = root / "context"
    for name in copied_sources():
        source = REPO / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            shutil.copytree(source, context / name, ignore=ignore)
        else:
            context.mkdir(exist_ok=True)
            shutil.copy2(source, context / name)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(root / "dist"),
            str(context),
        ]
    )
    (wheel,) = (root / "dist").glob("virtualtarget-*.whl")
    run([sys.executable, "-m", "venv", str(root / "venv")])
    bin_dir = root / "venv" / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, "--require-hashes", "--only-binary", ":all:", "-r", str(context / LOCK.name)])
    run([*pip, "--no-index", str(wheel)])
    return bin_dir


@pytest.mark.parametrize("command", ["webhook", "reconcile", "plan"])
def test_the_deployed_commands_run_without_extras(venv: Path, command: str) -> None:
    result = run([str(venv / "virtualtarget"), command, "--help"])
    assert result.stdout.startswith("usage: virtualtarget " + command)


def test_the_wheel_has_the_command_jumpstarters_operator_runs(venv: Path) -> None:
    """`exporter-set-controller`, the console script an image's `/exporter-set-controller`
    runs: it takes the operator's flags and, without NAMESPACE, says it needs it."""
    command = [
        str(venv / "exporter-set-controller"),
        "--provisioner=qemu.jumpstarter.dev",
        "--leader-elect",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=0",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin"})
    assert result.returncode == 1
    assert "NAMESPACE environment variable is required" in result.stderr
    helped = run([str(venv / "exporter-set-controller"), "--help"])
    assert helped.stdout.startswith("usage: exporter-set-controller")
    assert "--zap-log-level" in helped.stdout


def test_matplotlib_is_not_installed(venv: Path) -> None:
    probe = "import importlib.util; print(importlib.util.find_spec('matplotlib') is None)"
    assert run([str(venv / "python"), "-c", probe]).stdout.strip() == "True"


def test_simulate_without_the_extra_writes_the_summary_and_says_what_to_install(
    venv: Path, tmp_path: Path
) -> None:
    args = [str(venv / "virtualtarget"), "simulate", "--scenario", str(SCENARIO)]
    result = run([*args, "--out", str(tmp_path / "a")], check=False)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("simulate: plotting needs matplotlib: ")
    assert "pip install 'virtualtarget[simulate]'" in result.stderr
    assert (tmp_path / "a" / "summary.md").is_file()
    assert not (tmp_path / "a" / "pool.png").exists()
    plain = run([*args, "--out", str(tmp_path / "b"), "--no-plot"])
    assert plain.stderr == "" and (tmp_path / "b" / "summary.md").is_file()
