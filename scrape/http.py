"""A small threaded HTTP(S) server for the reconciler's probes and metrics.

The reconciler is a threaded program with no event loop; the standard library's
ThreadingHTTPServer answers its few routes. With TLS, each connection's handshake runs in
the connection's own thread (not in the accept loop), so a slow client cannot hold up
the probes. Addresses follow controller-runtime's flags: `:8443` (all interfaces),
`127.0.0.1:8443`, and `0` for "do not serve".
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Reply", "Route", "Server", "parse_address", "serve"]

log = logging.getLogger(__name__)

Reply = tuple[int, str, bytes]  # (status, content type, body)
Route = Callable[[Mapping[str, str]], Reply]  # request headers -> reply
TEXT = "text/plain; charset=utf-8"


def parse_address(value: str) -> tuple[str, int] | None:
    """`:8443` -> ("0.0.0.0", 8443); `host:port` as given; `0` -> None (disabled)."""
    if value.strip() == "0":
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bind address {value!r}: expected [HOST]:PORT, or 0 to disable")
    return (host.strip("[]") or "0.0.0.0"), int(port)


def _handler(routes: Mapping[str, Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                status, content_type, body = 404, TEXT, b"not found\n"
            else:
                try:
                    status, content_type, body = route(dict(self.headers.items()))
                except Exception:  # a broken probe must answer, not drop the connection
                    log.exception("%s failed", self.path)
                    status, content_type, body = 500, TEXT, b"internal error\n"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        conn, address = super().get_request()
        if self.tls is not None:  # the handshake happens on first read, in the handler thread
            conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address


@dataclass
class Server:
    httpd: _Server
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def serve(
    address: tuple[str, int], routes: Mapping[str, Route], tls: ssl.SSLContext | None = None
) -> Server:
    """Listen on `address` (OSError when it cannot) and answer in a daemon thread."""
    httpd = _Server(address, _handler(routes))
    httpd.tls = tls
    thread = threading.Thread(target=httpd.serve_forever, daemon=True, name=f"http-{address[1]}")
    thread.start()
    return Server(httpd, thread)
