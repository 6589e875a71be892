"""A release's image archive: one tar that OCI readers and Docker's both load.

The images built here come out of buildah as docker-archives (`harness.images`). A release
ships each as an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`) that
also carries Docker's `manifest.json` pointing at the same blobs, as `docker save` has
written since Docker 25: `ctr images import` and `docker load` (25 and later) read the
layout and name the image from `io.containerd.image.name`; `podman load` and older
Dockers read `manifest.json`'s `RepoTags`.

The image manifest is written here, so its digest, the one the release's manifests name
the image by, is that archive's own: importing it anywhere keeps that digest. Layers are
kept uncompressed (their digests are the config's diff_ids) and every tar header is fixed
(mode 0644, owner 0, time 0), so the same image and labels make the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "CONTAINERD_NAME",
    "OciImage",
    "manifest_digest",
    "write_oci_archive",
]

CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
CHUNK = 1 << 20


class ArchiveError(RuntimeError):
    """A docker-archive this module cannot read."""


@dataclass(frozen=True)
class OciImage:
    """What a written archive holds: its names and its manifest's digest."""

    archive: Path
    names: tuple[str, ...]
    digest: str  # sha256:... of the image manifest

    def reference(self, name: str | None = None) -> str:
        """`name@digest`, the form a manifest names a released image by."""
        return f"{name or self.names[0]}@{self.digest}"


def _json_bytes(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def _descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
    return {
        "mediaType": media_type,
        "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
        "size": len(blob),
    }


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add_bytes(out: tarfile.TarFile, name: str, data: bytes) -> None:
    out.addfile(_info(name, len(data)), io.BytesIO(data))


class _Hashing(io.RawIOBase):
    """A reader that hashes what passes through it."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source, self.hash = source, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.source.read(len(buffer))
        self.hash.update(data)
        buffer[: len(data)] = data
        return len(data)


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    reader = tar.extractfile(name)
    if reader is None:
        raise ArchiveError(f"{tar.name!s}: no file {name}")
    return reader


def write_oci_archive(
    docker_archive: Path,
    out: Path,
    names: Sequence[str],
    labels: Mapping[str, str] | None = None,
) -> OciImage:
    """Write `docker_archive`'s image to `out` under every one of `names` (full
    references, `registry/repository:tag`), with `labels` added to its configuration."""
    if not names:
        raise ArchiveError("an archive needs at least one name")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with (
        tarfile.open(docker_archive) as source,
        tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as target,
    ):
        entries = json.load(_member(source, "manifest.json"))
        if len(entries) != 1:
            raise ArchiveError(f"{docker_archive}: {len(entries)} images, expected one")
        entry = entries[0]
        config = json.load(_member(source, entry["Config"]))
        config.setdefault("config", {}).setdefault("Labels", {}).update(labels or {})
        diff_ids = config["rootfs"]["diff_ids"]
        if len(diff_ids) != len(entry["Layers"]):
            raise ArchiveError(f"{docker_archive}: layers and diff_ids differ in number")
        _add_bytes(target, "oci-layout", _json_bytes({"imageLayoutVersion": "1.0.0"}))
        layers = [
            _copy_layer(source, target, member, diff_id)
            for member, diff_id in zip(entry["Layers"], diff_ids, strict=True)
        ]
        config_blob = _json_bytes(config)
        config_descriptor = _descriptor(CONFIG_TYPE, config_blob)
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": config_descriptor,
            "layers": layers,
        }
        manifest_blob = _json_bytes(manifest)
        described = _descriptor(MANIFEST_TYPE, manifest_blob)
        for blob in (config_blob, manifest_blob):
            _add_bytes(target, _blob_path(_descriptor("", blob)["digest"]), blob)
        index = {
            "schemaVersion": 2,
            "mediaType": INDEX_TYPE,
            "manifests": [
                {**described, "annotations": {CONTAINERD_NAME: name, REF_NAME: name}}
                for name in names
            ],
        }
        _add_bytes(target, "index.json", _json_bytes(index))
        docker_manifest = [
            {
                "Config": _blob_path(config_descriptor["digest"]),
                "RepoTags": list(names),
                "Layers": [_blob_path(layer["digest"]) for layer in layers],
            }
        ]
        _add_bytes(target, "manifest.json", _json_bytes(docker_manifest))
    partial.replace(out)
    return OciImage(out, tuple(names), described["digest"])


def _blob_path(digest: str) -> str:
    return "blobs/" + digest.replace(":", "/", 1)


def _copy_layer(
    source: tarfile.TarFile, target: tarfile.TarFile, member: str, diff_id: str
) -> dict[str, Any]:
    """Copy one uncompressed layer under its digest, checked against the config's diff_id."""
    info = source.getmember(member)
    hashing = _Hashing(_member(source, member))
    target.addfile(_info(_blob_path(diff_id), info.size), io.BufferedReader(hashing, CHUNK))
    found = "sha256:" + hashing.hash.hexdigest()
    if found != diff_id:
        raise ArchiveError(f"layer {member}: digest {found}, its diff_id says {diff_id}")
    return {"mediaType": LAYER_TYPE, "digest": diff_id, "size": info.size}


def manifest_digest(archive: Path) -> dict[str, str]:
    """Each name in an archive's `index.json` with the digest of the manifest it names,
    read back from the archive and checked against the blob it points at."""
    with tarfile.open(archive) as tar:
        index = json.load(_member(tar, "index.json"))
        named: dict[str, str] = {}
        for entry in index["manifests"]:
            blob = _member(tar, _blob_path(entry["digest"])).read()
            if "sha256:" + hashlib.sha256(blob).hexdigest() != entry["digest"]:
                raise ArchiveError(f"{archive}: manifest blob does not match {entry['digest']}")
            named[entry["annotations"][CONTAINERD_NAME]] = entry["digest"]
        return named
