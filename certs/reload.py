"""A server TLS context that follows certificate rotation without a restart.

cert-manager and `virtualtarget certs` replace `tls.crt` and `tls.key` in place (a
Secret volume swaps a symlink). The webhook must present the new certificate to new
connections while requests already in flight finish on the old one, so restarting the
process is not an option.

How: the returned context's `sni_callback` runs during every handshake (OpenSSL calls it
whether or not the client sends SNI). It looks at the files' inode, size and mtime at
most once per `check_interval`, loads a fresh context when they changed, and points the
connection at the newest context. Established connections keep the context they
negotiated with. A pair that does not load (a new key beside the old certificate while
the files are being replaced) keeps the previous context and is logged once.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cryptography import x509

__all__ = ["CertificateReloader", "serving_context"]

log = logging.getLogger(__name__)

# What identifies a version of the files without reading them: (inode, size, mtime) each.
Fingerprint = tuple[tuple[int, int, int], ...]


def _new_context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cafile=client_ca)
    return ctx


def _not_after(cert: Path) -> float:
    """The certificate's expiry as a UNIX timestamp (the first certificate of the chain)."""
    return x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc.timestamp()


class CertificateReloader:
    """Holds the newest good context for a certificate folder; see the module docstring.

    `expires_at` is when the certificate being served expires (UNIX seconds), for the
    metric an expiring certificate alerts on."""

    def __init__(
        self,
        cert_dir: Path,
        client_ca: Path | None = None,
        *,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cert, self._key = cert_dir / "tls.crt", cert_dir / "tls.key"
        self._client_ca = client_ca
        self._interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._seen = self._fingerprint()
        # The first load raises: a server that cannot start with its certificate must not.
        self.current = _new_context(self._cert, self._key, client_ca)
        self.expires_at = _not_after(self._cert)
        self._next_check = clock() + check_interval

    def _paths(self) -> tuple[Path, ...]:
        return (self._cert, self._key) + ((self._client_ca,) if self._client_ca else ())

    def _fingerprint(self) -> Fingerprint:
        def one(path: Path) -> tuple[int, int, int]:
            try:
                st = os.stat(path)  # follows symlinks, as a Secret volume needs
            except OSError:
                return (0, -1, 0)
            return (st.st_ino, st.st_size, st.st_mtime_ns)

        return tuple(one(p) for p in self._paths())

    def refresh(self) -> ssl.SSLContext:
        """The newest context, reloading first if the files changed since the last check."""
        now = self._clock()
        if now < self._next_check:
            return self.current
        with self._lock:
            if now < self._next_check:
                return self.current
            self._next_check = now + self._interval
            seen = self._fingerprint()
            if seen != self._seen:
                self._seen = seen  # a bad pair is tried, and logged, once per version
                try:
                    self.current = _new_context(self._cert, self._key, self._client_ca)
                    self.expires_at = _not_after(self._cert)
                except (OSError, ssl.SSLError, ValueError) as err:
                    log.warning(
                        "keeping the previous certificate: %s does not load: %s",
                        self._cert.parent,
                        err,
                    )
                else:
                    log.info("loaded a new certificate from %s", self._cert.parent)
            return self.current

    def sni_callback(
        self, conn: ssl.SSLObject | ssl.SSLSocket, _name: str | None, ctx: ssl.SSLContext
    ) -> None:
        newest = self.refresh()
        if newest is not ctx:
            conn.context = newest

    def serving_context(self) -> ssl.SSLContext:
        """The context to listen with: every handshake switches to the newest one."""
        listening = self.current
        listening.sni_callback = self.sni_callback
        return listening


def serving_context(
    cert_dir: Path, client_ca: Path | None = None, *, check_interval: float = 1.0
) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or later) serving `cert_dir`'s newest `tls.crt`/`tls.key`.

    With `client_ca`, clients must present a certificate signed by it (the apiserver's
    `--admission-control-config-file` kubeconfig supplies one).
    """
    return CertificateReloader(cert_dir, client_ca, check_interval=check_interval).serving_context()
