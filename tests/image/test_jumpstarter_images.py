"""Jumpstarter's images as built here (`harness.jumpstarter_images`): release 0.9.0's run
by runc as the release's manifests run them (the image's user, a read-only root
filesystem, no capabilities, no network), each program a Deployment starts answering
`--help` and knowing every flag that Deployment passes it; and each archive, main's too,
carrying its Containerfile's configuration and the names the manifests pull by (main's
run on the node: tests/node/test_main_operator.py)."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.images import Unpacked
from harness.jumpstarter_images import (
    CONTROLLER,
    IMAGES,
    OPERATOR,
    ReleaseImage,
    build_image,
    release_file,
)
from tests.image.support import unpacked_each
from tests.release_images import (
    Container,
    final_stage_config,
    manager_manifest_container,
    rendered_containers,
)

pytestmark = pytest.mark.image


@pytest.fixture(scope="module")
def archives() -> dict[str, Path]:
    """The archives as `make jumpstarter-images` builds them (once per set of inputs)."""
    return {image.key: build_image(image) for image in IMAGES}


@pytest.fixture(scope="module")
def images(
    archives: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Unpacked]]:
    with unpacked_each(archives, tmp_path_factory) as each:
        yield each


# (image, how a Deployment runs it): the controller's and the routers' as the operator
# renders them, the operator's as its manager manifest
DEPLOYED = {
    **{f"{CONTROLLER.key}-{n}": (CONTROLLER.key, c) for n, (_, c) in rendered_containers().items()},
    f"{OPERATOR.key}-manager": (OPERATOR.key, manager_manifest_container()[1]),
}


@pytest.mark.parametrize(("key", "container"), DEPLOYED.values(), ids=DEPLOYED.keys())
def test_each_program_a_deployment_runs_answers_help_with_its_flags(
    images: dict[str, Unpacked], key: str, container: Container
) -> None:
    image = images[key]
    program = container.command or image.config["config"]["Entrypoint"]
    result = image.run(["--help"], entrypoint=program)
    assert result.returncode == 0, result.stderr
    # Go's flag package prints its usage on stderr
    assert result.stderr.startswith(f"Usage of {program[0]}:"), result.stderr
    defined = re.findall(r"^  -([\w-]+)", result.stderr, re.M)
    assert set(container.flags()) <= set(defined), (container.args, defined)


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.key)
def test_each_archive_carries_its_containerfiles_configuration_and_names(
    images: dict[str, Unpacked], archives: dict[str, Path], image: ReleaseImage
) -> None:
    config = images[image.key].config["config"]
    release = final_stage_config(release_file(image.containerfile, image.source))
    assert {key: config.get(key) for key in release} == release
    assert config.get("Cmd") is None  # the base's `python3` is not an argument of /manager
    uid, _, _ = config["User"].partition(":")
    assert uid.isdigit() and int(uid) != 0  # what runAsNonRoot can verify
    with tarfile.open(archives[image.key]) as archive:
        manifest = archive.extractfile("manifest.json")
        assert manifest is not None
        assert json.load(manifest)[0]["RepoTags"] == list(image.names)
