"""Shared helpers for the certificate tests (no tests here): a real uvicorn TLS server."""

from __future__ import annotations

import asyncio
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class GatedApp:
    """`/` answers at once; `/slow` signals `entered` and answers once `gate` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        if scope["path"] == "/slow":
            self.entered.set()
            await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, 60)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def wait_for(predicate: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Poll until `predicate` holds; fail with `what` if it never does (a liveness bound)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


@contextmanager
def serve(app: Any, context: ssl.SSLContext) -> Iterator[int]:
    """Run `app` with uvicorn over TLS on 127.0.0.1; yield the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
    config.load()
    config.ssl = context  # uvicorn builds its own context from paths; use ours instead
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, "uvicorn started")
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def client_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


def get(port: int, ctx: ssl.SSLContext, path: str = "/") -> tuple[int, int]:
    """One request on a new connection: (HTTP status, serial of the server certificate)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        assert conn.sock is not None
        der = conn.sock.getpeercert(binary_form=True)
        assert der is not None
        response = conn.getresponse()
        response.read()
        return response.status, x509.load_der_x509_certificate(der).serial_number
    finally:
        conn.close()
