"""The webhook's stop: SIGTERM (the kubelet's) drains, SIGINT stops at once.

kube-apiserver keeps its connections to a webhook Pod that is going. On SIGTERM the
server answers on for `DRAIN_SECONDS`, each answer saying `Connection: close`, so the
client closes a kept connection after its answer rather than the server closing it under
a review; then it exits 0. The real server, in its own process, without a cluster.
"""

from __future__ import annotations

import http.client
import signal
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from certs.authority import ensure_certificates
from harness.deploy_render import WEBHOOK_NAMESPACE, WEBHOOK_SERVICE
from harness.stack import LOOPBACK_HOSTS, ChildProcess, served_url
from scrape.serving import SERVING_WEBHOOK


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[tuple[ChildProcess, http.client.HTTPSConnection]]:
    """A webhook process and a kept-alive connection to it."""
    certs = ensure_certificates(
        tmp_path / "certs", WEBHOOK_SERVICE, WEBHOOK_NAMESPACE, LOOPBACK_HOSTS
    )
    arguments = ["webhook", f"--cert-dir={certs.directory}", "--host=127.0.0.1", "--port=0"]
    process = ChildProcess.start("webhook", arguments, tmp_path)
    try:
        url = urlsplit(served_url(Path(process.log.name), SERVING_WEBHOOK, "https", process.popen))
        context = ssl.create_default_context(cadata=certs.ca_pem.decode())
        assert url.hostname is not None
        connection = http.client.HTTPSConnection(url.hostname, url.port, context=context)
        yield process, connection
        connection.close()
    finally:
        process.stop(sig=signal.SIGINT)


def _healthz(connection: http.client.HTTPSConnection) -> http.client.HTTPResponse:
    connection.request("GET", "/healthz")
    answer = connection.getresponse()
    answer.read()
    return answer


def test_sigterm_answers_on_with_connection_close_then_exits_cleanly(
    webhook: tuple[ChildProcess, http.client.HTTPSConnection],
) -> None:
    process, connection = webhook
    before = _healthz(connection)
    assert before.status == 200 and before.getheader("connection") != "close"

    process.signal(signal.SIGTERM)
    # The same kept connection answers on; once the signal is handled, with the close.
    deadline = time.monotonic() + 10
    while (answer := _healthz(connection)).getheader("connection") != "close":
        assert time.monotonic() < deadline, "no answer said Connection: close"
        time.sleep(0.05)
    assert answer.status == 200
    assert process.popen.poll() is None  # draining, still up

    assert process.popen.wait(timeout=30) == 0, process.log_tail()


def test_sigint_stops_at_once_without_a_drain(
    webhook: tuple[ChildProcess, http.client.HTTPSConnection],
) -> None:
    process, connection = webhook
    assert _healthz(connection).status == 200
    connection.close()  # else the server's TLS close waits on this idle client's answer
    process.signal(signal.SIGINT)
    # No drain: exits well before DRAIN_SECONDS would have let it.
    assert process.popen.wait(timeout=3) == 0, process.log_tail()
