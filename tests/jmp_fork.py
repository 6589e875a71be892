"""`jmp` started by fork from a process that imported Jumpstarter's CLI once.

A `jmp` start is 2 CPU-seconds of imports before it does anything (`jumpstarter_cli` pulls
in the Kubernetes asyncio client): the loopback tiers start about 75 exporters a run, 155
CPU-s of a run that is as long as its CPU (docs/measurements.md). So each pytest worker
keeps one server process that imports the console script's entry point
(`jumpstarter_cli.jmp:jmp`, as jumpstarter-cli 0.9.0's `entry_points.txt` names it) and
nothing else, starts no thread, and forks a child per request. The child is what the
console script would be after its imports: a session of its own, stdin from /dev/null,
stdout and stderr to the given file, the given environment and arguments, then the same
entry point with the same `sys.argv`; its exit status is its own.

The worker sees each child by a pidfd (exited or not, signalled by process group), since
the server, not the worker, is its parent and reaps it.

    python tests/jmp_fork.py PID    # the server (of the worker PID): a JSON request per
                                    # line on stdin, the child's pid back
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Forked", "spawn"]

_PR_SET_PDEATHSIG = 1
_REAP_EVERY_S = 0.5


@dataclass
class Forked:
    """A `jmp` forked by the server: its pid (also its process group) and a pidfd."""

    pid: int
    _pidfd: int | None  # None: it had exited before the pidfd could be opened

    def exited(self) -> bool:
        if self._pidfd is None:
            return True
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(readable)

    def wait(self, timeout: float) -> bool:
        """Whether it exited within `timeout` seconds."""
        if self._pidfd is None:
            return True
        readable, _, _ = select.select([self._pidfd], [], [], timeout)
        return bool(readable)

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class _Server:
    """This worker's server process, started at its first request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            home = tempfile.mkdtemp(prefix="virtualtarget-jmp-fork-")
            self._process = subprocess.Popen(
                [sys.executable, __file__, str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "HOME": home},
                cwd=home,
            )
            atexit.register(self.stop)
        return self._process

    def spawn(self, argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> Forked:
        request = {"argv": argv, "log": str(log), "env": env, "cwd": str(cwd)}
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            reply = process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the jmp fork server exited ({process.poll()})")
        pid = int(json.loads(reply)["pid"])
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            pidfd = None  # exited and reaped already
        return Forked(pid, pidfd)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # its end of input: it exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


_SERVER = _Server()


def spawn(argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> Forked:
    """`argv` (`jmp` and its arguments) forked by this worker's server."""
    return _SERVER.spawn(argv, log, env, cwd)


# -- the server -----------------------------------------------------------------------------


def _child(entry: Any, request: dict[str, Any]) -> None:
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = list(request["argv"])
        try:
            entry.main(args=sys.argv[1:], prog_name=Path(sys.argv[0]).name)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else int(done.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def serve(parent: int) -> None:
    # Gone with the worker that started it (its children are its tests' to stop).
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        return
    from jumpstarter_cli.jmp import jmp

    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:
        ready, _, _ = select.select([requests], [], [], _REAP_EVERY_S)
        _reap()
        if not ready:
            continue
        line = requests.readline()
        if not line:
            return
        pid = os.fork()
        if pid == 0:
            _child(jmp, json.loads(line))
        replies.write(json.dumps({"pid": pid}).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
