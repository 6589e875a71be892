"""The serving context follows rotated files: new connections, new certificate; none fails."""

from __future__ import annotations

import logging
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography import x509

from certs.authority import ensure_certificates, issue, new_ca
from certs.files import KEY_MODE, write_atomic
from certs.reload import CertificateReloader, serving_context
from tests.unit.test_certs_support import GatedApp, client_context, get, serve, wait_for

HOSTS = ["127.0.0.1", "localhost"]


def _serial(path: Path) -> int:
    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


def test_rotation_under_load_new_connections_see_new_certificate_and_nothing_fails(
    tmp_path: Path,
) -> None:
    certs = ensure_certificates(tmp_path, "webhook", "vt-system", HOSTS)
    old = _serial(certs.cert)
    app = GatedApp()
    ctx = client_context(certs.ca_cert)
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    lock = threading.Lock()

    def load() -> None:
        for _ in range(5000):  # bounded even if `stop` never comes
            if stop.is_set():
                return
            try:
                outcome = get(port, ctx)
            except Exception as err:
                with lock:
                    errors.append(err)
            else:
                with lock:
                    results.append(outcome)

    def seen(serial: int) -> int:
        with lock:
            return sum(1 for _, s in results if s == serial)

    with (
        serve(app, serving_context(tmp_path, check_interval=0.05)) as port,
        ThreadPoolExecutor(5) as pool,
    ):
        in_flight = pool.submit(get, port, ctx, "/slow")
        wait_for(app.entered.is_set, "the slow request reached the app")
        workers = [pool.submit(load) for _ in range(4)]
        wait_for(lambda: seen(old) >= 20, "requests on the first certificate")

        # Same CA, new names: the serving certificate is reissued (key first, then cert).
        renewed = ensure_certificates(tmp_path, "webhook", "vt-system", [*HOSTS, "rotated.test"])
        assert any("issued serving certificate" in a for a in renewed.actions)
        new = _serial(certs.cert)
        assert new != old
        wait_for(lambda: seen(new) >= 20, "requests on the rotated certificate")

        app.gate.set()
        assert in_flight.result(timeout=30) == (200, old)  # finished on the old connection
        stop.set()
        for w in workers:
            w.result(timeout=60)
        assert get(port, ctx) == (200, new)  # a fresh connection after rotation

    assert errors == []
    assert {status for status, _ in results} == {200}
    assert {serial for _, serial in results} == {old, new}


def test_half_written_pair_keeps_the_old_context_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    certs = ensure_certificates(tmp_path, "webhook", "vt-system", HOSTS)
    clock = [0.0]
    reloader = CertificateReloader(tmp_path, check_interval=1.0, clock=lambda: clock[0])
    first = reloader.current

    ca = new_ca("other", now=x509.load_pem_x509_certificate(certs.ca_pem).not_valid_before_utc)
    replacement = issue(ca, ["webhook"], now=ca.cert.not_valid_before_utc)
    write_atomic(certs.key, replacement.key_pem, KEY_MODE)  # the key lands before the cert

    with caplog.at_level(logging.WARNING, logger="certs.reload"):
        assert reloader.refresh() is first  # not yet time to look
        clock[0] += 1.0
        assert reloader.refresh() is first  # looked: the pair does not match
        clock[0] += 1.0
        assert reloader.refresh() is first  # same files: not retried, not logged again
    assert len([r for r in caplog.records if "keeping the previous" in r.message]) == 1

    write_atomic(certs.cert, replacement.cert_pem, 0o644)
    clock[0] += 1.0
    assert reloader.refresh() is not first


def test_minimum_version_is_tls_1_2(tmp_path: Path) -> None:
    ensure_certificates(tmp_path, "webhook", "vt-system", HOSTS)
    assert serving_context(tmp_path).minimum_version == ssl.TLSVersion.TLSv1_2


def test_missing_certificate_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        serving_context(tmp_path)


def test_client_ca_requires_a_client_certificate(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path / "server", "webhook", "vt-system", HOSTS)
    clients = tmp_path / "clients"
    client_ca = new_ca(
        "apiserver-clients", now=x509.load_pem_x509_certificate(certs.ca_pem).not_valid_before_utc
    )
    leaf = issue(
        client_ca, ["kube-apiserver"], now=client_ca.cert.not_valid_before_utc, client=True
    )
    stranger_ca = new_ca("stranger", now=client_ca.cert.not_valid_before_utc)
    stranger = issue(
        stranger_ca, ["kube-apiserver"], now=client_ca.cert.not_valid_before_utc, client=True
    )
    for name, data in [
        ("ca.crt", client_ca.cert_pem),
        ("client.crt", leaf.cert_pem),
        ("client.key", leaf.key_pem),
        ("stranger.crt", stranger.cert_pem),
        ("stranger.key", stranger.key_pem),
    ]:
        write_atomic(clients / name, data, KEY_MODE)

    server_ctx = serving_context(certs.directory, client_ca=clients / "ca.crt")
    with serve(GatedApp(), server_ctx) as port:
        good = client_context(certs.ca_cert, clients / "client.crt", clients / "client.key")
        assert get(port, good)[0] == 200
        for bad in [
            client_context(certs.ca_cert),
            client_context(certs.ca_cert, clients / "stranger.crt", clients / "stranger.key"),
        ]:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                get(port, bad)
