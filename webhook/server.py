"""Serving the app over TLS with uvicorn, certificates reloaded on rotation.

The socket is bound here, before uvicorn starts, so a port in use is a one-line error
rather than uvicorn's exit; the TLS context comes from `certs.reload.CertificateReloader`, so
a rotated `tls.crt`/`tls.key` is served to new connections without a restart.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import uvicorn
import uvloop
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from certs.reload import CertificateReloader

__all__ = ["bind", "run", "serve", "tls_context", "tls_reloader"]


def tls_reloader(cert_dir: Path, client_ca: Path | None = None) -> CertificateReloader:
    """The reloading certificate; OSError/ssl.SSLError name what could not be loaded."""
    for name in ("tls.crt", "tls.key"):
        if not (cert_dir / name).is_file():
            raise FileNotFoundError(
                f"{cert_dir / name}: no such file (expected tls.crt and tls.key)"
            )
    return CertificateReloader(cert_dir, client_ca)


def tls_context(cert_dir: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """The reloading server context to listen with."""
    return tls_reloader(cert_dir, client_ca).serving_context()


# kube-apiserver keeps an idle connection to a webhook for 90 s (Go's IdleConnTimeout);
# uvicorn's default of 5 s closed it between sparse admissions, so each such review paid
# a new TCP + TLS handshake (about 3 ms more per request, bench/RESULTS.md). Outlive it.
KEEP_ALIVE_SECONDS = 120

# After SIGTERM (the kubelet's, once the preStop sleep has let the endpoints move), keep
# answering this long, each answer with `Connection: close`, before closing what is left.
# kube-apiserver keeps its connections to a Pod that is going; closing an idle one under a
# review it has just sent makes that admission fail with EOF (Go does not resend a POST).
# A connection closed by the answer's header is closed by the client, with nothing lost.
# Go's client reuses its most recently used idle connection first, so one still idle after
# the drain is one it would pick last. 2 s: the uninstall waits for each going Pod (5 s
# cost 16 s more in the node tier's uninstall). SIGINT (or a second SIGTERM) stops at once.
DRAIN_SECONDS = 2.0


class DrainingServer(uvicorn.Server):
    """uvicorn's server, draining for `drain` seconds on the first SIGTERM."""

    def __init__(self, config: uvicorn.Config, drain: float = DRAIN_SECONDS) -> None:
        super().__init__(config)
        self.drain = drain
        self.draining_since: float | None = None

    @property
    def draining(self) -> bool:
        return self.draining_since is not None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self.draining and self.drain > 0:
            self.draining_since = time.monotonic()
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self.draining_since is not None and time.monotonic() - self.draining_since >= self.drain:
            self.should_exit = True
        return await super().on_tick(counter)


def closing_while(draining: Callable[[], bool], app: ASGIApp) -> ASGIApp:
    """`app`, its answers saying `Connection: close` while `draining()`."""

    async def closing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not draining():
            await app(scope, receive, send)
            return

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_closing)

    return closing


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY on accepted sockets only
    # then, and without it each response waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve(
    app: FastAPI,
    sock: socket.socket,
    context: ssl.SSLContext,
    on_started: Callable[[], None] = lambda: None,
    http: str = "httptools",
) -> None:
    """Serve until SIGINT, or SIGTERM and the drain; `on_started` runs once the server
    accepts connections."""
    host, port = sock.getsockname()[:2]
    # httptools parses HTTP in C: about half of a request's server time went to h11
    # (which the benchmark can still select, to compare).
    server: DrainingServer | None = None
    config = uvicorn.Config(
        closing_while(lambda: server is not None and server.draining, app),
        host=host,
        port=port,
        http=http,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    config.load()
    config.ssl = context
    server = DrainingServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        on_started()
    await task


def run(
    app: FastAPI,
    sock: socket.socket,
    context: ssl.SSLContext,
    on_started: Callable[[], None] = lambda: None,
    *,
    fast: bool = True,
) -> None:
    """`serve` with httptools on a uvloop event loop (libuv: cheaper socket and TLS
    handling); `fast=False` is uvicorn's pure-Python h11 on asyncio, for comparison."""
    if fast:
        uvloop.run(serve(app, sock, context, on_started))
    else:
        asyncio.run(serve(app, sock, context, on_started, http="h11"))
