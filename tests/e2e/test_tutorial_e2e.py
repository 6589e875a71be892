"""docs/tutorial.md, run as a reader runs it: `make run`'s stack in one shell, the page's
commands in another, and what each prints compared with what the page shows (after
tests/tutorialpage.py's normalising of names, times, ports and paths)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.deploy_render import REPO
from tests.docpages import Session
from tests.tutorialpage import MAKE_RUN, PAGE, TUTORIAL, normalised, shown, steps

READY_LINE = "Ctrl-C stops everything."
START_TIMEOUT_S = 120.0
# The reader's checkout is linked, not copied: the page's commands only read it, and
# `make run`'s state folder is this test's own.
NOT_LINKED = (".git", ".run", ".cluster")


def readers_checkout(work: Path) -> Path:
    tree = work / "checkout"
    tree.mkdir()
    for entry in sorted(REPO.iterdir()):
        if entry.name not in NOT_LINKED:
            (tree / entry.name).symlink_to(entry)
    return tree


@contextlib.contextmanager
def make_run(tree: Path) -> Iterator[str]:
    """What `make run` runs, with the checkout's own state folder; yields what it printed
    up to its last line of instructions, and stops it as Ctrl-C would."""
    process = subprocess.Popen(
        [str(REPO / ".venv/bin/python"), "-m", "harness.dev", "--workdir", str(tree / ".run")],
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    printed: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while not printed or printed[-1].strip() != READY_LINE:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            assert line is not None, "make run stopped:\n" + "".join(printed)
            printed.append(line)
        yield "".join(printed)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_make_run_is_what_the_page_says_it_runs() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "\nrun: $(STAMP) control-plane\n\t$(PY) -m harness.dev\n" in makefile


@pytest.mark.timeout(600)
def test_the_tutorial_prints_what_the_page_shows(tmp_path: Path) -> None:
    tree = readers_checkout(tmp_path)
    checkouts = (str(tree), str(REPO))
    page_steps = steps(PAGE, TUTORIAL)
    assert page_steps and all(s.commands for s in page_steps)
    with make_run(tree) as printed:
        expected = shown(PAGE, MAKE_RUN)
        assert sorted(normalised(printed, checkouts)) == sorted(
            normalised(expected.text, checkouts)
        ), f"{PAGE.name}:{expected.line}: make run printed\n{printed}"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        shell = Session(cwd=tree, env=env | {"KUBECACHEDIR": str(tmp_path / "kubectl-cache")})
        for step in page_steps:
            *before, command = step.commands
            shell.run_all(before)
            ran = shell.run(command, check=False)
            assert ran.returncode == step.exit, (
                f"{command.where()}: `{ran.run}` exited {ran.returncode}, the page expects "
                f"{step.exit}\n{ran.stdout}{ran.stderr}"
            )
            if step.output is not None:
                assert normalised(ran.stdout + ran.stderr, checkouts) == normalised(
                    step.output.text, checkouts
                ), f"{command.where()}: `{ran.run}` printed\n{ran.stdout}{ran.stderr}"
