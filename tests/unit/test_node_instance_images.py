"""The node tier's instance images (tests/node/images): test stand-ins under the
provisioner's default names, saying so, with every package pinned at the release."""

from __future__ import annotations

import re

import pytest

from reconciler.model.jumpstarter import JUMPSTARTER_RELEASE, TCP_NETWORK_DRIVER
from tests.controller_double import DRIVERS
from tests.node.instance_images import INSTANCE_IMAGES, STAND_IN_LABEL, InstanceImage

REQUIREMENTS = INSTANCE_IMAGES[0].context / "requirements.txt"


def _pins() -> dict[str, str]:
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"{line!r} is not pinned with =="
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _distribution(driver_type: str) -> str:
    return driver_type.split(".", 1)[0].replace("_", "-")


@pytest.mark.parametrize("image", INSTANCE_IMAGES, ids=lambda i: i.role)
def test_each_image_says_it_is_a_stand_in_for_the_default_name(image: InstanceImage) -> None:
    text = image.context.joinpath("Dockerfile").read_text()
    assert "TEST STAND-IN" in text
    label = re.search(rf'{re.escape(STAND_IN_LABEL)}="([^"]+)"', text)
    assert label is not None
    assert label.group(1).replace("${RELEASE}", JUMPSTARTER_RELEASE) == image.name
    assert image.name.endswith(f":{JUMPSTARTER_RELEASE}")
    for key in ("real", "stand-in"):
        assert f"virtualtarget.jumpstarter.dev/{key}=" in text


def test_the_exporter_image_pins_the_release_and_the_drivers_the_templates_use() -> None:
    pins = _pins()
    jumpstarter = {name: v for name, v in pins.items() if name.startswith("jumpstarter")}
    assert set(jumpstarter.values()) == {JUMPSTARTER_RELEASE}
    wanted = {_distribution(d["type"]) for d in DRIVERS} | {
        _distribution(TCP_NETWORK_DRIVER),
        "jumpstarter-cli",  # jmp run
        "jumpstarter-driver-composite",  # jmp run wraps the export in a Composite
    }
    assert wanted <= set(pins), f"missing from {REQUIREMENTS}: {sorted(wanted - set(pins))}"


def test_the_exporter_image_carries_the_exec_placeholder_the_init_container_copies() -> None:
    from reconciler.model.jumpstarter import EXEC_BINARY

    text = INSTANCE_IMAGES[0].context.joinpath("Dockerfile").read_text()
    assert f"COPY jumpstarter-exec {EXEC_BINARY}" in text
    assert INSTANCE_IMAGES[0].context.joinpath("jumpstarter-exec").is_file()
