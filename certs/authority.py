"""A private CA and the webhook's serving certificate, kept valid on every run.

kube-apiserver calls the webhook over TLS and trusts only the `caBundle` of the webhook
configuration, so the project needs its own CA and a serving certificate whose names
cover every way the Service is addressed. `ensure_certificates` is idempotent: it keeps
what is still good, renews the serving certificate when it nears expiry or its names
change (re-using the CA, so the registered bundle stays valid), and reports what it did.
The CLI (`virtualtarget certs`) and the loopback control-plane harness both call it.

Files in the output folder: `ca.crt`, `ca.key`, `tls.crt`, `tls.key` (the names a
Kubernetes TLS Secret uses). Keys are written before certificates, each atomically, so a
reloading server sees at worst a new key with the old certificate, which it rejects.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.files import CERT_MODE, KEY_MODE, write_atomic

__all__ = [
    "CA_LIFETIME",
    "RENEW_BEFORE",
    "SERVING_LIFETIME",
    "CertificateSet",
    "Issued",
    "ensure_certificates",
    "issue",
    "new_ca",
    "serving_names",
]

CA_LIFETIME = dt.timedelta(days=3650)
SERVING_LIFETIME = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)
# Tolerate clocks a little behind ours (apiserver nodes, CI runners).
_BACKDATE = dt.timedelta(minutes=5)

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"

SAN = x509.DNSName | x509.IPAddress


@dataclass(frozen=True)
class Issued:
    """A certificate with its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


@dataclass(frozen=True)
class CertificateSet:
    """Where the files are, the CA bundle to register, and what this run changed."""

    directory: Path
    ca_pem: bytes
    actions: tuple[str, ...]

    @property
    def ca_cert(self) -> Path:
        return self.directory / CA_CERT

    @property
    def ca_key(self) -> Path:
        return self.directory / CA_KEY

    @property
    def cert(self) -> Path:
        return self.directory / TLS_CERT

    @property
    def key(self) -> Path:
        return self.directory / TLS_KEY


def serving_names(service: str, namespace: str, hosts: Sequence[str] = ()) -> tuple[str, ...]:
    """Every name the Service answers to inside the cluster, then the extra hosts."""
    base = f"{service}.{namespace}"
    names = [service, base, f"{base}.svc", f"{base}.svc.cluster.local", *hosts]
    return tuple(dict.fromkeys(names))  # de-duplicated, order kept


def _san(name: str) -> SAN:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(common_name: str, *, now: dt.datetime, lifetime: dt.timedelta = CA_LIFETIME) -> Issued:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    key = _new_key()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(
    ca: Issued,
    names: Sequence[str],
    *,
    now: dt.datetime,
    lifetime: dt.timedelta = SERVING_LIFETIME,
    client: bool = False,
) -> Issued:
    """A leaf certificate for `names` (DNS names or IP addresses) signed by `ca`.

    `client=True` makes a client certificate (for `--client-ca`), otherwise a server one.
    """
    key = _new_key()
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(min(now + lifetime, ca.cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False
        )
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
    )
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def _load(cert_path: Path, key_path: Path) -> Issued | None:
    """The pair on disk, or None when either file is missing, unreadable or they differ."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return None
    return Issued(cert, key)


def _sans(cert: x509.Certificate) -> set[SAN]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {n for n in ext if isinstance(n, x509.DNSName | x509.IPAddress)}


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _why_renew(
    cert: Issued | None, ca: Issued, names: Sequence[str], now: dt.datetime
) -> str | None:
    """Why the serving certificate must be reissued, or None to keep it."""
    if cert is None:
        return "missing or unreadable"
    if not _signed_by(cert.cert, ca.cert):
        return "not signed by the current CA"
    if cert.cert.not_valid_after_utc - now < RENEW_BEFORE:
        return f"expires {cert.cert.not_valid_after_utc:%Y-%m-%d}"
    if _sans(cert.cert) != {_san(n) for n in names}:
        return "names changed"
    return None


def ensure_certificates(
    out_dir: Path,
    service: str,
    namespace: str,
    hosts: Sequence[str] = (),
    *,
    days: int = SERVING_LIFETIME.days,
    now: dt.datetime | None = None,
) -> CertificateSet:
    """Create or renew the CA and serving certificate in `out_dir`; keep what is valid."""
    now = now or dt.datetime.now(dt.UTC)
    names = serving_names(service, namespace, hosts)
    actions: list[str] = []

    ca = _load(out_dir / CA_CERT, out_dir / CA_KEY)
    if ca is not None and ca.cert.not_valid_after_utc - now < RENEW_BEFORE:
        actions.append(f"CA expires {ca.cert.not_valid_after_utc:%Y-%m-%d}: replaced")
        ca = None
    elif ca is None:
        actions.append(f"created CA {out_dir / CA_CERT}")
    else:
        actions.append(f"kept CA {out_dir / CA_CERT}")
    if ca is None:
        ca = new_ca(f"virtualtarget-webhook-ca-{secrets.token_hex(4)}", now=now)
        write_atomic(out_dir / CA_KEY, ca.key_pem, KEY_MODE)
        write_atomic(out_dir / CA_CERT, ca.cert_pem, CERT_MODE)

    serving = _load(out_dir / TLS_CERT, out_dir / TLS_KEY)
    reason = _why_renew(serving, ca, names, now)
    if reason is None:
        actions.append(f"kept serving certificate {out_dir / TLS_CERT}")
    else:
        serving = issue(ca, names, now=now, lifetime=dt.timedelta(days=days))
        # Key first: a reloader seeing the new key with the old certificate keeps the old pair.
        write_atomic(out_dir / TLS_KEY, serving.key_pem, KEY_MODE)
        write_atomic(out_dir / TLS_CERT, serving.cert_pem, CERT_MODE)
        actions.append(
            f"issued serving certificate {out_dir / TLS_CERT} ({reason}) for {', '.join(names)},"
            f" valid until {serving.cert.not_valid_after_utc:%Y-%m-%d}"
        )
    return CertificateSet(out_dir, ca.cert_pem, tuple(actions))
