"""The KubeVirt exporter image this project ships (images/kubevirt-exporter): its pins
against the dependencies of pull request #927's driver, read from the vendored tarball,
and the driver's wheel as build_wheel.py writes it from that tarball. Built and run on
the image tier (tests/image/test_kubevirt_exporter.py)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from api.provisioners import DEFAULT_IMAGES, SHIPPED_IMAGES
from api.provisioners.kubevirt import KUBEVIRT_EXPORTER_IMAGE, PROVISIONER
from harness.images import (
    KUBEVIRT_DRIVER_COMMIT,
    KUBEVIRT_DRIVER_VERSION,
    KUBEVIRT_EXPORTER_CONTEXT,
    QEMU_EXPORTER_CONTEXT,
    _kubevirt_context,
    kubevirt_source_tarball,
)
from pool.model.jumpstarter import EXPORTER_UID, JUMPSTARTER_RELEASE
from pool.rendering.provisioners.kubevirt import COMPOSITE_DRIVER, DRIVER_TYPES
from tests.kubevirt_source import source_text

DOCKERFILE = (KUBEVIRT_EXPORTER_CONTEXT / "Dockerfile").read_text()
DRIVER_PYPROJECT = "python/packages/jumpstarter-driver-kubevirt/pyproject.toml"


def _pins(requirements: Path) -> dict[str, str]:
    pins = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"{line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version
    return pins


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads(source_text(DRIVER_PYPROJECT))["project"]
    return project


def _build_wheel() -> ModuleType:
    path = KUBEVIRT_EXPORTER_CONTEXT / "build_wheel.py"
    spec = importlib.util.spec_from_file_location("build_wheel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_image_is_the_provisioners_default_and_named_for_the_release() -> None:
    assert KUBEVIRT_EXPORTER_IMAGE.endswith(f":{JUMPSTARTER_RELEASE}")
    assert KUBEVIRT_EXPORTER_IMAGE.rsplit(":", 1)[0] in DOCKERFILE
    assert DEFAULT_IMAGES[PROVISIONER] == {"exporter": KUBEVIRT_EXPORTER_IMAGE}
    assert KUBEVIRT_EXPORTER_IMAGE in SHIPPED_IMAGES
    for label in (
        "virtualtarget.jumpstarter.dev/jumpstarter=",
        "virtualtarget.jumpstarter.dev/kubevirt=",
    ):
        assert label in DOCKERFILE
    assert KUBEVIRT_DRIVER_COMMIT in DOCKERFILE
    assert f"DRIVER_VERSION={KUBEVIRT_DRIVER_VERSION}\n" in DOCKERFILE


def test_it_pins_every_dependency_of_the_driver_at_the_release() -> None:
    pins = _pins(KUBEVIRT_EXPORTER_CONTEXT / "requirements.txt")
    dependencies = [Requirement(d) for d in _project()["dependencies"]]  # type: ignore[attr-defined]
    assert {canonicalize_name(r.name) for r in dependencies} == {
        "jumpstarter",
        "jumpstarter-driver-composite",
        "jumpstarter-driver-power",
        "jumpstarter-driver-network",
        "lightkube",
        "websockets",
    }
    for requirement in dependencies:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned"
        assert requirement.specifier.contains(pins[name]), (requirement, pins[name])
        if name.startswith("jumpstarter"):
            assert pins[name] == JUMPSTARTER_RELEASE
    jumpstarter = {name: v for name, v in pins.items() if name.startswith("jumpstarter")}
    assert set(jumpstarter.values()) == {JUMPSTARTER_RELEASE}
    assert "jumpstarter-cli" in pins  # jmp run
    # Not on PyPI: the wheel is built from the tarball, not pinned from an index.
    assert "jumpstarter-driver-kubevirt" not in pins


def test_what_both_exporter_images_carry_has_one_version() -> None:
    kubevirt = _pins(KUBEVIRT_EXPORTER_CONTEXT / "requirements.txt")
    qemu = _pins(QEMU_EXPORTER_CONTEXT / "requirements.txt")
    assert {n: v for n, v in kubevirt.items() if n in qemu and qemu[n] != v} == {}


def test_the_wheel_is_the_drivers_unmodified_source_with_its_metadata(tmp_path: Path) -> None:
    context = _kubevirt_context(tmp_path, kubevirt_source_tarball())
    wheel = _build_wheel().build(
        context / "driver",
        context / "driver-LICENSE",
        tmp_path / "wheels",
        KUBEVIRT_DRIVER_VERSION,
        KUBEVIRT_DRIVER_COMMIT,
    )
    project = _project()
    assert wheel.name == f"jumpstarter_driver_kubevirt-{KUBEVIRT_DRIVER_VERSION}-py3-none-any.whl"
    dist_info = f"jumpstarter_driver_kubevirt-{KUBEVIRT_DRIVER_VERSION}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    package = "python/packages/jumpstarter-driver-kubevirt/jumpstarter_driver_kubevirt"
    sources = {n for n in members if n.startswith("jumpstarter_driver_kubevirt/")}
    assert sources >= {
        "jumpstarter_driver_kubevirt/__init__.py",
        "jumpstarter_driver_kubevirt/driver.py",
        "jumpstarter_driver_kubevirt/client.py",
    }
    for name in sources:
        assert members[name].decode() == source_text(f"{package}/{name.split('/', 1)[1]}"), name
    meta = members[f"{dist_info}/METADATA"].decode()
    assert re.findall(r"^Requires-Dist: (.*)$", meta, re.MULTILINE) == project["dependencies"]
    assert f"\nVersion: {KUBEVIRT_DRIVER_VERSION}\n" in meta
    assert f"archive/{KUBEVIRT_DRIVER_COMMIT}.zip" in meta
    assert members[f"{dist_info}/licenses/LICENSE"].decode() == source_text("LICENSE")
    entry_points = members[f"{dist_info}/entry_points.txt"].decode()
    declared = project["entry-points"]["jumpstarter.drivers"]  # type: ignore[index]
    assert entry_points.splitlines()[0] == "[jumpstarter.drivers]"
    assert {line for line in entry_points.splitlines()[1:] if line} == {
        f"{name} = {target}" for name, target in declared.items()
    }
    # The types the rendering gives are the classes the entry points name.
    targets = {target.replace(":", ".") for target in declared.values()}
    assert {*DRIVER_TYPES, COMPOSITE_DRIVER} == targets
    # Two builds of the same source are the same bytes.
    again = _build_wheel().build(
        context / "driver",
        context / "driver-LICENSE",
        tmp_path / "again",
        KUBEVIRT_DRIVER_VERSION,
        KUBEVIRT_DRIVER_COMMIT,
    )
    assert again.read_bytes() == wheel.read_bytes()


def test_its_user_is_the_one_the_pod_runs_jmp_run_as() -> None:
    assert f"USER {EXPORTER_UID}:{EXPORTER_UID}" in DOCKERFILE
