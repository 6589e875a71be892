"""Nothing of the build machine reaches the image: its pip settings and CA, handed to
the build as secrets, are in no layer and no part of the image configuration; and two
builds of one commit install the same packages, file for file."""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from pathlib import Path

import pytest

from harness.images import (
    CACHE,
    PIP_CA_SECRET,
    PIP_CONF_SECRET,
    archive_config,
    build_product,
    pip_secrets,
    product_image,
)
from tests.image.conftest import layer_members

pytestmark = pytest.mark.image

PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s+(.*?)-----END CERTIFICATE-----", re.S)
SITE_PACKAGES = re.compile(r"^opt/venv/lib/python3\.\d+/site-packages/([^/]+\.dist-info)/RECORD$")


def certificates(pem: bytes) -> set[bytes]:
    return {b"".join(body.split()) for body in PEM.findall(pem)}


def test_no_layer_and_no_setting_holds_the_build_secrets(archive: Path, tmp_path: Path) -> None:
    secrets = pip_secrets(tmp_path)
    assert PIP_CA_SECRET in secrets, "this machine's pip trusts a CA bundle: it is handed in"
    host = certificates(secrets[PIP_CA_SECRET].read_bytes())
    # The image's own CA bundle (Debian's ca-certificates) shares the public CAs with
    # the host's; what only the host trusts must appear nowhere.
    own: set[bytes] = set()
    texts: list[tuple[str, bytes]] = []
    for layer, member, tar in layer_members(archive):
        name = member.name.removeprefix("./")
        assert not name.startswith("run/secrets/") or member.isdir(), (layer, name)
        assert Path(name).name not in (PIP_CONF_SECRET, PIP_CA_SECRET, "pip.conf"), (layer, name)
        if member.isfile() and member.size < 4 << 20:
            reader = tar.extractfile(member)
            assert reader is not None
            data = reader.read()
            if name == "etc/ssl/certs/ca-certificates.crt":
                own |= certificates(data)
            if b"CERTIFICATE" in data or b"index-url" in data:
                texts.append((f"{layer}:{name}", data))
    foreign = host - own
    print(f"{len(host)} CAs in this machine's pip bundle, {len(foreign)} not in the image's own")
    assert foreign, "the host's pip CA is one the image does not carry"
    for where, data in texts:
        flat = b"".join(data.split())
        assert not any(cert in flat for cert in foreign), where
    conf = secrets.get(PIP_CONF_SECRET)
    values = [v.strip() for v in conf.read_text().splitlines()[1:]] if conf else []
    for where, data in texts:
        for value in values:
            if "index-url" in value:
                assert value.split("=", 1)[1].strip().encode() not in data, where
    config = archive_config(archive)
    text = str(config)
    assert "PIP_CERT" not in text and "PIP_CONFIG_FILE" not in text
    assert "/run/secrets" not in str(config.get("config", {}))


def installed_files(archive: Path) -> dict[str, str]:
    """dist-info folder -> digest of its RECORD (every installed file with its hash)."""
    records: dict[str, str] = {}
    for _, member, tar in layer_members(archive):
        match = SITE_PACKAGES.match(member.name.removeprefix("./"))
        if match and member.isfile():
            reader = tar.extractfile(member)
            assert reader is not None
            records[match[1]] = hashlib.sha256(reader.read()).hexdigest()
    return records


def test_two_builds_of_one_commit_install_the_same_packages(archive: Path) -> None:
    again = CACHE / "virtualtarget-again.tar"
    try:
        build_product(again, layer_cache=False)  # every step run again, nothing reused
        first, second = installed_files(archive), installed_files(again)
    finally:
        again.unlink(missing_ok=True)
    print(f"{len(first)} distributions, each with the same RECORD in both builds")
    assert first and first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []
    assert any(name.startswith("virtualtarget-") for name in first)


def test_the_archive_carries_only_the_name_the_deployments_run(archive: Path) -> None:
    # `ctr -n k8s.io images import` creates every name in RepoTags.
    with tarfile.open(archive) as tar:
        manifest = tar.extractfile("manifest.json")
        assert manifest is not None
        (entry,) = json.load(manifest)
    assert entry["RepoTags"] == [product_image()]
