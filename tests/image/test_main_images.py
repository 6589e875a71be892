"""Jumpstarter main's exporter and QEMU runtime images as built here (`harness.main_images`),
run by runc as main's provisioner runs them: the exporter as its unprivileged user, the
runtime as root with the exporter's jumpstarter-exec on its shared volume, serving the
launcher socket and running Debian's QEMU through it; each archive carrying main's
Containerfile's configuration and the name main's e2e manifest runs it by."""

from __future__ import annotations

import json
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.images import Unpacked
from harness.main_images import (
    EXEC_IN_IMAGE,
    EXPORTER,
    MAIN_PYTHON_IMAGES,
    RUNTIME,
    VERSION,
    MainImage,
    build_main_image,
    main_file,
)
from pool.model.jumpstarter import EXPORTER_UID, LAUNCHER_SOCKET, SHARED_DIR
from tests.dockerfiles import final_stage_instructions
from tests.image.support import unpacked_each

pytestmark = [pytest.mark.image, pytest.mark.main_images]  # `make main-images`, not `make test`

ROOT = (0, 0)  # the runtime's securityContext in main's Pod
EXPORTER_USER = (EXPORTER_UID, EXPORTER_UID)


@pytest.fixture(scope="module")
def archives() -> dict[str, Path]:
    """The archives as `make jumpstarter-images` builds them (once per set of inputs)."""
    return {image.key: build_main_image(image) for image in MAIN_PYTHON_IMAGES}


@pytest.fixture(scope="module")
def images(
    archives: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Unpacked]]:
    with unpacked_each(archives, tmp_path_factory) as each:
        yield each


def test_the_exporter_holds_main_s_packages_at_their_version_and_jmp_runs(
    images: dict[str, Unpacked],
) -> None:
    exporter = images[EXPORTER.key]
    listed = exporter.run(
        [
            "-c",
            "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: "
            "d.version for d in m.distributions() "
            "if d.metadata['Name'].startswith('jumpstarter')}))",
        ],
        entrypoint=["python3"],
        user=EXPORTER_USER,
    )
    assert listed.returncode == 0, listed.stderr
    versions = json.loads(listed.stdout)
    assert len(versions) == 61, sorted(versions)  # main's 62 packages less hatch-pin-jumpstarter
    assert set(versions.values()) == {VERSION}
    run = exporter.run(["run", "--help"], entrypoint=["jmp"], user=EXPORTER_USER)
    assert run.returncode == 0, run.stderr
    assert "--exporter-config" in run.stdout
    version = exporter.run(["version"], entrypoint=[EXEC_IN_IMAGE], user=EXPORTER_USER)
    assert version.returncode == 0, version.stderr
    assert VERSION in version.stdout + version.stderr


def test_the_runtime_serves_the_exporter_s_exec_binary_and_runs_qemu_through_it(
    images: dict[str, Unpacked], tmp_path: Path
) -> None:
    """What main's Pod does: the init container copies the binary onto the shared volume,
    the runtime's entrypoint serves the socket on it, and the driver's calls run there."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copy2(images[EXPORTER.key].rootfs / EXEC_IN_IMAGE.lstrip("/"), shared)
    runtime = images[RUNTIME.key]
    entrypoint = runtime.config["config"]["Entrypoint"]
    serve = " ".join([*entrypoint, *runtime.config["config"]["Cmd"]])
    exec_ = f"{entrypoint[0]} exec --socket {LAUNCHER_SOCKET} --"
    script = (
        f"{serve} & "
        f"for i in $(seq 50); do [ -S {LAUNCHER_SOCKET} ] && break; sleep 0.1; done; "
        f"{exec_} qemu-system-x86_64 --version && {exec_} qemu-system-aarch64 --version && "
        f"{exec_} qemu-img --version && "
        f"{exec_} sh -c 'test -s /usr/share/edk2/ovmf/OVMF_CODE.fd && "
        "test -s /usr/share/edk2/ovmf/OVMF_VARS.fd && test -s /usr/share/AAVMF/AAVMF_CODE.fd && "
        "test -s /usr/share/AAVMF/AAVMF_VARS.fd && echo firmware'; "
        f"status=$?; {entrypoint[0]} shutdown --socket {LAUNCHER_SOCKET}; wait; exit $status"
    )
    result = runtime.run(
        ["-c", script], entrypoint=["sh"], user=ROOT, mounts={SHARED_DIR: shared}, timeout=60
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "QEMU emulator version" in result.stdout
    assert "qemu-img version" in result.stdout
    assert result.stdout.rstrip().endswith("firmware")


@pytest.mark.parametrize("image", MAIN_PYTHON_IMAGES, ids=lambda i: i.key)
def test_each_archive_carries_main_s_configuration_and_its_name(
    images: dict[str, Unpacked], archives: dict[str, Path], image: MainImage
) -> None:
    config = images[image.key].config["config"]
    wanted = {}
    for word, rest in final_stage_instructions(main_file(image.containerfile)):
        if word in {"ENTRYPOINT", "CMD"}:
            wanted[word.title()] = json.loads(rest)
        elif word == "USER":
            wanted["User"] = rest
    assert {key: config.get(key) for key in wanted} == wanted
    if image is EXPORTER:  # no entrypoint or user of its own: the Pod names both
        assert wanted == {} and config.get("Entrypoint") is None
        assert config.get("User", "") in {"", "0", "root"}
    with tarfile.open(archives[image.key]) as archive:
        manifest = archive.extractfile("manifest.json")
        assert manifest is not None
        assert json.load(manifest)[0]["RepoTags"] == [image.name]
