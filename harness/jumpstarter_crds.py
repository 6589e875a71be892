"""The CRDs of a Jumpstarter source tarball, read from the tarball without building it.

`make jumpstarter` copies the release's `jumpstarter.dev` CRDs beside its build
(`harness.jumpstarter_build`); a unit test needs them without that build, so they are read
here from the tarball the build would use (`source_tarball()`). Each tarball holds one file
of each CRD's name (its operator's `config/crd/bases`, which the build copies); a name
found twice or not at all is an error, never a guess.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import yaml

from harness.jumpstarter_build import source_tarball

__all__ = ["crd_in", "release_crd"]


def crd_in(tarball: Path, name: str) -> dict[str, Any]:
    """The CRD file `name` (e.g. `jumpstarter.dev_exporters.yaml`) of `tarball`, parsed."""
    with tarfile.open(tarball) as archive:
        found = [m for m in archive.getmembers() if m.isfile() and Path(m.name).name == name]
        if len(found) != 1:
            where = ", ".join(m.name for m in found) or "nowhere"
            raise LookupError(f"{tarball}: expected one {name}, found {where}")
        stream = archive.extractfile(found[0])
        assert stream is not None  # a regular file
        document: dict[str, Any] = yaml.safe_load(stream)
    return document


def release_crd(name: str) -> dict[str, Any]:
    """The release's CRD `name`, as `make jumpstarter` copies it into `.bin/`."""
    return crd_in(source_tarball(), name)
