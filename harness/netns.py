"""A network namespace of its own for a program that listens on fixed ports, joined to
this machine's loopback by TCP relays and nothing else.

Jumpstarter's controller listens on `:8082`, `:8083` and `127.0.0.1:8085` whatever it is
told, so two of them cannot share a network namespace. Each runs in one of these instead:
a namespace with only its own loopback, no device and no route out, so nothing it sends
can leave the machine. What must cross is relayed by this process, which holds a socket on
each side (a socket stays in the namespace it was made in, whichever thread uses it):

- `forward_in(port, address)`: a free port on an address of this machine (its 127.0.0.1, or
  the node IP, where Pods dial) reaches the namespace's 127.0.0.1:`port` (the exporters and
  clients dial the controller and the router);
- `forward_out(port, address)`: the namespace's `address`:`port` reaches this machine's
  `address`:`port` (the controller reaches kube-apiserver at the kubeconfig's address).

Making the namespace and a socket in it needs CAP_SYS_ADMIN (root, as CI runs).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NetnsError", "NetworkNamespace"]

_CLONE_NEWNET = 0x40000000
_LOOPBACK = "127.0.0.1"
_CHUNK = 1 << 16


class NetnsError(RuntimeError):
    """The namespace could not be made or used; the message says why and what to run."""


@functools.cache
def _libc() -> ctypes.CDLL:
    # Loaded once: a CDLL per call (two per relayed connection) was a twentieth of a busy
    # test worker's CPU.
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc().setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise NetnsError(f"setns: {os.strerror(errno)} (a network namespace needs root)")


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy one direction until its end closes, then pass the close on."""
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Relay both directions of one connection; close both once both ends are done."""
    back = threading.Thread(target=_pump, args=(b, a), daemon=True)
    back.start()
    _pump(a, b)
    back.join()
    a.close()
    b.close()


@dataclass
class NetworkNamespace:
    """A namespace kept by a holder process (`unshare --net sleep`), so that the programs
    run in it can stop and start again while its relays stay."""

    holder: subprocess.Popen[bytes]
    _listeners: list[socket.socket] = field(default_factory=list)
    _closed: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def create(cls, addresses: Sequence[str] = ()) -> NetworkNamespace:
        """A new namespace whose loopback also holds `addresses` (each a /32), for a program
        that must dial this machine at one of them (`forward_out`)."""
        setup = "".join(f"ip addr add {a}/32 dev lo && " for a in addresses)
        try:
            holder = subprocess.Popen(
                ["unshare", "--net", "--", "sh", "-c",
                 f"ip link set lo up && {setup}echo up && exec sleep infinity"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )  # fmt: skip
        except FileNotFoundError as error:
            raise NetnsError("netns: `unshare` not found (util-linux)") from error
        # Its line says the namespace exists and its loopback is up: before it, the holder's
        # /proc/PID/ns/net may still be this machine's own.
        assert holder.stdout is not None and holder.stderr is not None
        if holder.stdout.readline().strip() != b"up":
            holder.wait()
            err = holder.stderr.read().decode().strip()
            raise NetnsError(f"netns: unshare --net failed: {err} (it needs root)")
        return cls(holder)

    @property
    def path(self) -> Path:
        return Path(f"/proc/{self.holder.pid}/ns/net")

    def command(self, args: Sequence[str]) -> list[str]:
        """`args` run inside the namespace."""
        return ["nsenter", f"--net={self.path}", "--", *args]

    def new_socket(self) -> socket.socket:
        """A TCP socket made inside the namespace (usable from any thread)."""
        with open("/proc/thread-self/ns/net", "rb") as own, open(self.path, "rb") as target:
            _setns(target.fileno())
            try:
                return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            finally:
                _setns(own.fileno())

    def _serve(self, listener: socket.socket, dial: Callable[[], socket.socket]) -> None:
        listener.listen(64)
        self._listeners.append(listener)

        def accept() -> None:
            while not self._closed.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return  # closed
                try:
                    peer = dial()
                except OSError:
                    conn.close()  # the other side refused: so does the relay
                    continue
                threading.Thread(target=_splice, args=(conn, peer), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    def forward_in(self, port: int, address: str = _LOOPBACK) -> int:
        """Relay a free port of `address` (this machine's) to the namespace's `port`; the port."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((address, 0))

        def dial() -> socket.socket:
            peer = self.new_socket()
            peer.connect((_LOOPBACK, port))
            return peer

        self._serve(listener, dial)
        bound: int = listener.getsockname()[1]
        return bound

    def forward_out(self, port: int, address: str = _LOOPBACK) -> None:
        """Relay the namespace's `address`:`port` to this machine's (the address must be on
        the namespace's loopback: 127.0.0.1, or one given to `create`)."""
        listener = self.new_socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, port))
        self._serve(listener, lambda: socket.create_connection((address, port)))

    def close(self) -> None:
        """Stop relaying and end the namespace (its holder; the programs in it are the
        caller's to stop first)."""
        self._closed.set()
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait()
        for pipe in (self.holder.stdout, self.holder.stderr):
            if pipe is not None:
                pipe.close()
