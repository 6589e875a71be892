"""ensure_certificates: creates, keeps, renews; the CA verifies what it issued."""

from __future__ import annotations

import datetime as dt
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.verification import PolicyBuilder, Store

from certs.authority import (
    CA_LIFETIME,
    RENEW_BEFORE,
    SERVING_LIFETIME,
    ensure_certificates,
    serving_names,
)

NOW = dt.datetime(2026, 1, 15, 12, 0, tzinfo=dt.UTC)
HOSTS = ("127.0.0.1", "localhost")


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_first_run_creates_ca_and_serving_pair(tmp_path: Path) -> None:
    made = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for key in (made.ca_key, made.key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert made.ca_pem == made.ca_cert.read_bytes()
    assert [a.split()[0] for a in made.actions] == ["created", "issued"]

    ca, leaf = load(made.ca_cert), load(made.cert)
    assert ca.not_valid_after_utc - ca.not_valid_before_utc >= CA_LIFETIME
    assert leaf.not_valid_after_utc == NOW + SERVING_LIFETIME
    assert isinstance(leaf.public_key(), ec.EllipticCurvePublicKey)
    assert leaf.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "hook",
        "hook.vt",
        "hook.vt.svc",
        "hook.vt.svc.cluster.local",
        "localhost",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]


@pytest.mark.parametrize(
    "name",
    [
        x509.DNSName("hook.vt.svc"),
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ],
)
def test_ca_bundle_verifies_the_serving_certificate(tmp_path: Path, name: x509.GeneralName) -> None:
    made = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    verifier = (
        PolicyBuilder()
        .store(Store(x509.load_pem_x509_certificates(made.ca_pem)))
        .time(NOW + dt.timedelta(days=1))
        .build_server_verifier(name)  # type: ignore[arg-type]
    )
    chain = verifier.verify(load(made.cert), [])
    assert chain[-1] == load(made.ca_cert)


def test_second_run_keeps_everything(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW + dt.timedelta(days=200))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert again.ca_pem == first.ca_pem
    assert [a.split()[0] for a in again.actions] == ["kept", "kept"]


def test_renews_within_30_days_of_expiry_reusing_the_ca(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    old = load(first.cert)
    late = old.not_valid_after_utc - RENEW_BEFORE + dt.timedelta(hours=1)
    renewed = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=late)
    new = load(renewed.cert)
    assert renewed.ca_pem == first.ca_pem
    assert new.serial_number != old.serial_number
    assert new.not_valid_after_utc == late + SERVING_LIFETIME
    assert any("expires" in a for a in renewed.actions)


def test_renews_when_names_change(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    renewed = ensure_certificates(tmp_path, "hook", "vt", ["10.0.0.7"], now=NOW)
    assert renewed.ca_pem == first.ca_pem
    assert "names changed" in renewed.actions[-1]
    sans = load(renewed.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert ipaddress.ip_address("10.0.0.7") in sans.value.get_values_for_type(x509.IPAddress)
    assert "localhost" not in sans.value.get_values_for_type(x509.DNSName)


def test_replaced_ca_reissues_the_serving_certificate(tmp_path: Path) -> None:
    ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    (tmp_path / "ca.key").unlink()
    renewed = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    assert "not signed by the current CA" in renewed.actions[-1]
    load(renewed.cert).verify_directly_issued_by(load(renewed.ca_cert))


def test_mismatched_key_is_reissued(tmp_path: Path) -> None:
    ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    (tmp_path / "tls.key").write_bytes((tmp_path / "ca.key").read_bytes())
    renewed = ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    assert renewed.actions[-1].startswith("issued")


def test_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    ensure_certificates(tmp_path, "hook", "vt", HOSTS, now=NOW)
    ensure_certificates(tmp_path, "hook", "vt", ["other"], now=NOW)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_serving_names_deduplicate_in_order() -> None:
    assert serving_names("a", "b", ["a.b", "x"]) == (
        "a",
        "a.b",
        "a.b.svc",
        "a.b.svc.cluster.local",
        "x",
    )
