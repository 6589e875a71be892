"""`jmp` forked from the worker's server (tests/jmp_fork.py) runs as its console script
would: its arguments, environment, folder and output file, its own process group."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from tests.jmp_fork import spawn


def test_a_forked_jmp_prints_its_usage_to_its_file_and_exits(tmp_path: Path) -> None:
    log = tmp_path / "help.log"
    forked = spawn(["jmp", "--help"], log, {**os.environ, "MARK": "x"}, tmp_path)
    assert forked.wait(timeout=60)
    assert forked.exited()
    assert "Usage: jmp" in log.read_text()
    forked.close()


def _config(folder: Path, endpoint: str) -> Path:
    config = folder / "exporter.yaml"
    config.write_text(
        "apiVersion: jumpstarter.dev/v1alpha1\nkind: ExporterConfig\n"
        f"metadata: {{namespace: lab, name: e}}\nendpoint: {endpoint}\ntoken: t\n"
        "tls: {insecure: true}\nexport: {}\n"
    )
    return config


def test_a_forked_jmp_run_gives_up_on_a_refused_controller_as_jmp_run_does(
    tmp_path: Path,
) -> None:
    log = tmp_path / "run.log"
    config = _config(tmp_path, "127.0.0.1:9")  # refused
    forked = spawn(["jmp", "run", "--exporter-config", str(config)], log, dict(os.environ),
                   tmp_path)  # fmt: skip
    assert forked.wait(timeout=60), log.read_text()
    assert "rapid failure 5/5" in log.read_text()
    forked.close()


def test_a_forked_jmp_leads_its_own_group_and_ends_by_a_signal_to_it(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never answers
        config = _config(tmp_path, f"127.0.0.1:{silent.getsockname()[1]}")
        log = tmp_path / "run.log"
        forked = spawn(["jmp", "run", "--exporter-config", str(config)], log, dict(os.environ),
                       tmp_path)  # fmt: skip
        assert not forked.wait(timeout=3), log.read_text()
        assert os.getpgid(forked.pid) == forked.pid
        assert Path(f"/proc/{forked.pid}/cwd").resolve() == tmp_path.resolve()
        os.killpg(forked.pid, signal.SIGKILL)
        assert forked.wait(timeout=30)
        assert forked.exited()
        forked.close()
