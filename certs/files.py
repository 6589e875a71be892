"""Atomic file writes for key material.

A reader (the webhook's certificate reloader, kubelet's secret sync) must never see a
half-written PEM file, and a private key must never be readable by others, not even
for a moment: so each file is written to a temporary name in the same folder with its
final mode, flushed, then renamed over the old one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["CERT_MODE", "KEY_MODE", "write_atomic"]

KEY_MODE = 0o600
CERT_MODE = 0o644


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace `path` with `data` in one rename; the file has `mode` from its creation."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)  # mkstemp creates 0600; certificates are public
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
