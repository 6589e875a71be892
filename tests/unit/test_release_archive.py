"""The release's image archives and SBOMs, on a docker-archive made here (no build)."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from harness.ociarchive import ArchiveError, manifest_digest, write_oci_archive
from harness.release import (
    REPO,
    changelog_section,
    previous_version,
    recorded,
    tree_version,
    version_key,
)
from harness.sbom import distributions, write_sbom

NAME = "ghcr.io/jumpstarter-dev/virtualtarget-qemu-exporter:9.9.9"
ALIAS = "ghcr.io/jumpstarter-dev/virtualtarget-qemu-exporter:0.9.0"


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _metadata(name: str, version: str, licence: str = "") -> bytes:
    text = f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n{licence}"
    return text.encode()


def docker_archive(path: Path, layers: list[dict[str, bytes]]) -> Path:
    """A docker-archive as buildah writes one: uncompressed layers, a config naming
    their diff_ids, and manifest.json."""
    blobs = [_tar(files) for files in layers]
    diff_ids = ["sha256:" + hashlib.sha256(blob).hexdigest() for blob in blobs]
    config = json.dumps({"config": {"User": "65532"}, "rootfs": {"diff_ids": diff_ids}})
    members = {f"{d[7:]}.tar": blob for d, blob in zip(diff_ids, blobs, strict=True)}
    members["config.json"] = config.encode()
    members["manifest.json"] = json.dumps(
        [{"Config": "config.json", "RepoTags": [ALIAS], "Layers": list(members)[:-1]}]
    ).encode()
    path.write_bytes(_tar(members))
    return path


SITE = "opt/jumpstarter/lib/python3.11/site-packages"
LAYERS = [
    {
        f"{SITE}/pip-23.0.dist-info/METADATA": _metadata("pip", "23.0", "License: MIT\n"),
        f"{SITE}/jumpstarter-0.9.0.dist-info/METADATA": _metadata(
            "jumpstarter", "0.9.0", "License-Expression: Apache-2.0\n"
        ),
        "usr/lib/python3/dist-packages/six-1.16.0.egg-info/PKG-INFO": _metadata(
            "six", "1.16.0", "Classifier: License :: OSI Approved :: MIT License\n"
        ),
    },
    # pip uninstalled in a later layer: its folder whited out.
    {f"{SITE}/.wh.pip-23.0.dist-info": b""},
]


def test_archive_names_every_name_with_the_digest_of_its_manifest(tmp_path: Path) -> None:
    source = docker_archive(tmp_path / "in.tar", LAYERS)
    image = write_oci_archive(source, tmp_path / "out.tar", [NAME, ALIAS], {"a": "b"})
    assert manifest_digest(image.archive) == {NAME: image.digest, ALIAS: image.digest}
    assert image.reference() == f"{NAME}@{image.digest}"
    with tarfile.open(image.archive) as tar:
        names = tar.getnames()
        assert names[0] == "oci-layout" and {"index.json", "manifest.json"} <= set(names)
        (docker,) = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        assert docker["RepoTags"] == [NAME, ALIAS]
        config = json.load(tar.extractfile(docker["Config"]))  # type: ignore[arg-type]
        # Layers keep their digests: the config's diff_ids name the same blobs.
        assert [f"blobs/sha256/{d[7:]}" for d in config["rootfs"]["diff_ids"]] == docker["Layers"]
        assert config["config"]["Labels"] == {"a": "b"} and config["config"]["User"] == "65532"
        for member in tar.getmembers():
            assert (member.mtime, member.uid, member.mode) == (0, 0, 0o644)


def test_the_same_image_and_labels_make_the_same_bytes(tmp_path: Path) -> None:
    source = docker_archive(tmp_path / "in.tar", LAYERS)
    first = write_oci_archive(source, tmp_path / "a.tar", [NAME], {"v": "1"})
    second = write_oci_archive(source, tmp_path / "b.tar", [NAME], {"v": "1"})
    assert first.archive.read_bytes() == second.archive.read_bytes()
    other = write_oci_archive(source, tmp_path / "c.tar", [NAME], {"v": "2"})
    assert other.digest != first.digest


def test_a_layer_that_is_not_its_diff_id_is_refused(tmp_path: Path) -> None:
    source = docker_archive(tmp_path / "in.tar", LAYERS)
    with tarfile.open(source) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    layer = next(name for name in members if name.endswith(".tar"))
    members[layer] = _tar({"other": b"x"})
    (tmp_path / "bad.tar").write_bytes(_tar(members))
    with pytest.raises(ArchiveError, match="diff_id"):
        write_oci_archive(tmp_path / "bad.tar", tmp_path / "out.tar", [NAME])
    assert not (tmp_path / "out.tar").exists()


def test_sbom_lists_the_packages_left_after_whiteouts(tmp_path: Path) -> None:
    source = docker_archive(tmp_path / "in.tar", LAYERS)
    found = {(d.name, d.version, d.licence) for d in distributions(source)}
    assert found == {("jumpstarter", "0.9.0", "Apache-2.0"), ("six", "1.16.0", "MIT License")}
    when = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
    out = tmp_path / "sbom.json"
    count = write_sbom(source, out, image=NAME, version="9.9.9", digest="sha256:ab", timestamp=when)
    document = json.loads(out.read_text())
    assert count == 2 and document["bomFormat"] == "CycloneDX" and document["specVersion"] == "1.6"
    purls = sorted(c["purl"] for c in document["components"])
    assert purls == ["pkg:pypi/jumpstarter@0.9.0", "pkg:pypi/six@1.16.0"]
    assert document["metadata"]["component"]["type"] == "container"
    again = tmp_path / "again.json"
    write_sbom(source, again, image=NAME, version="9.9.9", digest="sha256:ab", timestamp=when)
    assert again.read_text() == out.read_text()


def test_every_recorded_release_has_a_changelog_section_and_a_commit() -> None:
    for version, commit in recorded().items():
        assert changelog_section(version).startswith(f"## {version}")
        assert len(commit) == 40
    assert changelog_section(tree_version(REPO)).startswith("## ")


def test_the_previous_release_is_the_newest_recorded_before_this_version() -> None:
    previous, head = previous_version(), version_key(tree_version(REPO))
    assert previous in recorded() and version_key(previous) < head
    # This version may be recorded too, once cut: it is never its own previous release.
    older = [version_key(v) for v in recorded() if v != previous and version_key(v) < head]
    assert all(v < version_key(previous) for v in older)
