"""The product image, built once per run from the repository's Dockerfile on the local
debootstrap base (harness/images.py), and its root filesystem for runc."""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.images import CACHE, Unpacked, build_lock, build_product, unpacked


@pytest.fixture(scope="session")
def archive() -> Path:
    """The image `make image` built, the same archive: kept as it is when its inputs are
    unchanged (`build_once`), else built again with buildah's layer cache on."""
    return build_product()


@pytest.fixture(scope="session")
def image(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unpacked]:
    with unpacked(archive, tmp_path_factory.mktemp("image") / "unpacked") as root:
        yield root
    # Nothing stays behind: no container of this image, no mount under the cache or the
    # unpacked image. Other workers run their own containers and builds (the node tier's
    # images): the containers are told apart by their root, and the cache is looked at
    # between builds, under the build lock.
    listed = subprocess.run(["runc", "list", "--format", "json"], capture_output=True, text=True)
    containers = json.loads(listed.stdout or "null") or []
    assert [c["id"] for c in containers if c.get("rootfs") == str(root.rootfs)] == []
    with build_lock(CACHE):
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    assert [line for line in mounts if str(CACHE) in line or str(root.rootfs) in line] == []


def layer_members(archive: Path) -> Iterator[tuple[str, tarfile.TarInfo, tarfile.TarFile]]:
    """(layer, member, the layer's tar) for every entry of every layer, in order."""
    with tarfile.open(archive) as outer:
        manifest = outer.extractfile("manifest.json")
        assert manifest is not None
        for name in json.load(manifest)[0]["Layers"]:
            reader = outer.extractfile(name)
            assert reader is not None
            with tarfile.open(fileobj=reader) as layer:
                for entry in layer:
                    yield name, entry, layer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first image test's setup builds the debootstrap base and the image on a fresh
    clone (about 5 minutes on 2 cores), past the suite's default 300 s per test."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(900))
