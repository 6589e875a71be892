"""An image's software bill of materials: every Python distribution in its layers.

The image is read as it would run: its layers applied in order, whiteouts removing what a
later layer deleted. Each distribution's metadata (a `.dist-info/METADATA` or an
`.egg-info/PKG-INFO`, in any virtual environment or Debian's `dist-packages`) becomes a
CycloneDX component with its PyPI package URL, its licence as declared and the folder it
lies in. The document is written by cyclonedx-python-lib, CycloneDX's own library, and is
the same for the same image: its serial number derives from the image's digest and its
time is the release commit's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path, PurePosixPath

from cyclonedx.contrib.license.factories import LicenseFactory
from cyclonedx.model import Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

__all__ = ["Distribution", "distributions", "write_sbom"]

_METADATA = re.compile(r"(?:^|/)[^/]+\.(?:dist-info/METADATA|egg-info/PKG-INFO)$")
_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"
_LICENCE_CLASSIFIER = "License :: OSI Approved :: "


@dataclass(frozen=True, order=True)
class Distribution:
    name: str
    version: str
    folder: str  # where its metadata lies, e.g. /opt/venv/lib/python3.11/site-packages
    licence: str | None


def _layers(archive: Path) -> Iterator[tarfile.TarFile]:
    """The layers of a docker-archive, bottom first."""
    with tarfile.open(archive) as outer:
        reader = outer.extractfile("manifest.json")
        if reader is None:
            raise ValueError(f"{archive}: no manifest.json")
        (entry,) = json.load(reader)
        for member in entry["Layers"]:
            layer = outer.extractfile(member)
            if layer is None:
                raise ValueError(f"{archive}: no layer {member}")
            with tarfile.open(fileobj=layer, mode="r|*") as tar:
                yield tar


def _apply(files: dict[str, bytes], tar: tarfile.TarFile) -> None:
    """One layer over the files seen so far: whiteouts first remove, then files land."""
    for member in tar:
        path = PurePosixPath("/", member.name)
        if path.name == _OPAQUE:
            _remove_under(files, str(path.parent))
        elif path.name.startswith(_WHITEOUT):
            _remove_under(files, str(path.parent / path.name[len(_WHITEOUT) :]))
        elif member.isfile() and _METADATA.search(member.name):
            reader = tar.extractfile(member)
            if reader is not None:
                files[str(path)] = reader.read()


def _remove_under(files: dict[str, bytes], gone: str) -> None:
    for path in [p for p in files if p == gone or p.startswith(gone.rstrip("/") + "/")]:
        del files[path]


def _licence(headers: dict[str, list[str]]) -> str | None:
    """The licence a distribution declares: its SPDX expression, else its classifiers'
    names, else a one-line `License` field."""
    if headers.get("license-expression"):
        return headers["license-expression"][0]
    classified = [
        c[len(_LICENCE_CLASSIFIER) :]
        for c in headers.get("classifier", [])
        if c.startswith(_LICENCE_CLASSIFIER)
    ]
    if classified:
        return " OR ".join(classified) if len(classified) > 1 else classified[0]
    text = (headers.get("license") or [""])[0].strip()
    return text if text and "\n" not in text and len(text) <= 80 else None


def distributions(archive: Path) -> list[Distribution]:
    """Every Python distribution the image's root filesystem holds, sorted."""
    files: dict[str, bytes] = {}
    for tar in _layers(archive):
        _apply(files, tar)
    found = set()
    for path, text in files.items():
        message = BytesParser().parsebytes(text, headersonly=True)
        headers: dict[str, list[str]] = {}
        for key, value in message.items():
            headers.setdefault(key.lower(), []).append(str(value))
        if "name" in headers and "version" in headers:
            folder = str(PurePosixPath(path).parent.parent)
            found.add(
                Distribution(headers["name"][0], headers["version"][0], folder, _licence(headers))
            )
    return sorted(found)


def write_sbom(
    archive: Path,
    out: Path,
    *,
    image: str,
    version: str,
    digest: str,
    timestamp: dt.datetime,
) -> int:
    """Write the CycloneDX (1.6, JSON) document of `archive`'s Python packages; return how
    many it names. `image` is its repository, `digest` its manifest's."""
    licences = LicenseFactory()
    components = []
    for dist in distributions(archive):
        purl = PackageURL("pypi", None, re.sub(r"[-_.]+", "-", dist.name).lower(), dist.version)
        components.append(
            Component(
                name=dist.name,
                version=dist.version,
                purl=purl,
                bom_ref=f"{purl.to_string()}#{dist.folder}",
                licenses=[licences.make_from_string(dist.licence)] if dist.licence else None,
                properties=[Property(name="virtualtarget:folder", value=dist.folder)],
            )
        )
    repository, _, tag = image.rpartition(":")
    subject = Component(
        name=repository,
        version=version,
        type=ComponentType.CONTAINER,
        bom_ref=f"{repository}@{digest}",
        purl=PackageURL(
            "oci",
            None,
            repository.rsplit("/", 1)[-1],
            digest,
            qualifiers={"repository_url": repository, "tag": tag},
        ),
    )
    bom = Bom(
        components=components,
        serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"{repository}@{digest}"),
        metadata=BomMetaData(component=subject, timestamp=timestamp),
    )
    bom.register_dependency(subject, components)  # the image holds every package
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(JsonV1Dot6(bom).output_as_string(indent=2) + "\n")
    return len(components)
