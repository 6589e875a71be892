"""One node cluster for several processes: the node tier's pytest workers run their modules
on it side by side, and the start, the stop and the images are paid once.

The first process that asks starts it in a keeper process (`python -m harness.cluster
--state-file`), which outlives that process if need be (a process's node children die
with it); every asker then uses it through `attached_cluster`. Each module that shares it
says when it is done, and the last one stops it: the keeper stops the cluster and undoes
its host changes, so a module that needs the machine to itself can start its own. The
keeper also stops when the run it serves (`owner_pid`) is gone.

Everything is kept in `folder` (the run's: each process opens the same one), under an
flock: the keeper's id, what it wrote once ready, the modules done.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.controlplane import REPO_ROOT
from harness.node import NodeCluster, NodeError, attached_cluster
from harness.nodehost import remove_folder

__all__ = ["SharedNodeCluster"]

POLL_S = 0.5


class SharedNodeCluster:
    """The cluster the modules in `modules` share, kept in `folder`, started on first use
    (waiting up to `wait` seconds for another cluster on the machine to stop)."""

    def __init__(self, folder: Path, modules: Iterable[str], owner_pid: int, wait: float) -> None:
        self.folder = folder
        self.modules = frozenset(modules)
        self.owner_pid = owner_pid
        self.wait = wait
        folder.mkdir(parents=True, exist_ok=True)

    # -- files ------------------------------------------------------------------------

    @property
    def _state(self) -> Path:
        return self.folder / "state.json"

    @property
    def _stopped(self) -> Path:
        return self.folder / "state.json.stopped"

    @property
    def _keeper_pid(self) -> Path:
        return self.folder / "keeper.pid"

    @property
    def _done(self) -> Path:
        return self.folder / "done"

    @property
    def _log(self) -> Path:
        return self.folder / "keeper.log"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with (self.folder / "lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _done_modules(self) -> set[str]:
        return set(self._done.read_text().split()) if self._done.is_file() else set()

    # -- use --------------------------------------------------------------------------

    def get(self) -> NodeCluster:
        """The shared cluster, started by this call if no process has started it yet."""
        with self._locked():
            if not self._keeper_pid.is_file():
                self._start_keeper()
            deadline = time.monotonic() + self.wait + 300  # the start: seconds, the wait above
            while not self._state.is_file():
                if self._stopped.is_file() or time.monotonic() > deadline:
                    raise NodeError(
                        "the shared node cluster did not start; its keeper said:\n" + self._tail()
                    )
                time.sleep(POLL_S)
        described: dict[str, Any] = json.loads(self._state.read_text())
        return attached_cluster(described)

    def _start_keeper(self) -> None:
        with self._log.open("ab") as log:
            keeper = subprocess.Popen(
                [
                    sys.executable, "-m", "harness.cluster",
                    "--workdir", str(self.folder / "cluster"),
                    "--wait", str(self.wait),
                    "--state-file", str(self._state),
                    "--while-pid", str(self.owner_pid),
                ],
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Its own session: it outlives the process that started it, and a terminal's
                # Ctrl-C reaches it only through the run it serves (`--while-pid`).
                start_new_session=True,
            )  # fmt: skip
        self._keeper_pid.write_text(str(keeper.pid))

    def _tail(self, lines: int = 30) -> str:
        text = self._log.read_text(errors="replace") if self._log.is_file() else "(no output)"
        return "\n".join(text.splitlines()[-lines:])

    def done(self, module: str) -> dict[str, float] | None:
        """Record that `module` is done with the cluster; when it was the last, stop the
        cluster and return its start and stop times."""
        with self._locked():
            done = self._done_modules() | {module}
            self._done.write_text("\n".join(sorted(done)) + "\n")
            if not self.modules <= done or not self._keeper_pid.is_file():
                return None
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(self._keeper_pid.read_text()), signal.SIGINT)
        timings = self.stopped()
        remove_folder(self.folder / "cluster")  # its containerd holds the images: gigabytes
        return timings

    def stopped(self, timeout: float = 3600.0) -> dict[str, float] | None:
        """Wait until every module that shares the cluster is done and the cluster has
        stopped (the machine is free again); its start and stop times, or None if it
        never started."""
        deadline = time.monotonic() + timeout
        while True:
            with self._locked():
                if self.modules <= self._done_modules():
                    if not self._keeper_pid.is_file():
                        return None
                    if self._stopped.is_file():
                        timings: dict[str, float] = json.loads(self._stopped.read_text())
                        return timings
            if time.monotonic() > deadline:
                raise NodeError(
                    f"the shared node cluster still runs after {timeout:.0f} s; "
                    f"modules not done: {sorted(self.modules - self._done_modules())}"
                )
            time.sleep(POLL_S)
