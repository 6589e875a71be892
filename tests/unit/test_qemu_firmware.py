"""The guest's firmware: what each layout renders as the QEMU driver's
`default_partitions` for each architecture and `firmware.type`, that release 0.9.0's
driver reads those keys and boots from them, and what admission says of a firmware or
architecture the exporter image cannot boot."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest
from jumpstarter_driver_qemu.driver import Qemu, QemuPower

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from api.provisioners.qemu_firmware import EXPORTER_FIRMWARE, RUNTIME_FIRMWARE
from tests.unit.test_jumpstarter_contract import EXAMPLE_CLASS, EXAMPLE_SET, rendered_config
from tests.unit.test_webhook_crossobject import validate
from tests.unit.test_webhook_qemu_layout import QEMU, RELEASED, exporter_image, pool
from tests.unit.test_webhook_support import a_class
from webhook.checks_class import check_class

OTHER = "registry.example/lab/qemu:1"  # an exporter image this project does not ship


def _config(layout: str, arch: str, firmware: str | None) -> dict[str, Any]:
    klass = copy.deepcopy(EXAMPLE_CLASS)
    parameters = klass["spec"]["parameters"]
    parameters |= {"layout": layout, "arch": arch}
    if firmware:
        parameters["firmware"]["type"] = firmware
    config: dict[str, Any] = rendered_config(EXAMPLE_SET, klass)["export"]["qemu"]["config"]
    return config


@pytest.mark.parametrize(
    ("layout", "arch", "firmware", "partitions"),
    [
        # Release 0.9.0's layout: SeaBIOS unless UEFI is named; aarch64 always AAVMF.
        ("exporter", "x86_64", None, None),
        ("exporter", "x86_64", "bios", None),
        ("exporter", "x86_64", "uefi", EXPORTER_FIRMWARE["x86_64"]),
        ("exporter", "aarch64", None, EXPORTER_FIRMWARE["aarch64"]),
        ("exporter", "aarch64", "uefi", EXPORTER_FIRMWARE["aarch64"]),
        # Main's layout, as main renders it: UEFI from its runtime image, always.
        ("sidecar", "x86_64", None, RUNTIME_FIRMWARE["x86_64"]),
        ("sidecar", "x86_64", "bios", RUNTIME_FIRMWARE["x86_64"]),
        ("sidecar", "aarch64", None, RUNTIME_FIRMWARE["aarch64"]),
    ],
)
def test_each_layout_renders_the_firmware_of_the_arch_and_type(
    layout: str, arch: str, firmware: str | None, partitions: dict[str, str] | None
) -> None:
    config = _config(layout, arch, firmware)
    assert config["arch"] == arch
    assert config.get("default_partitions") == partitions


def test_the_released_driver_boots_from_the_partitions_rendered() -> None:
    """Each key is one 0.9.0's driver resolves to the rendered path where no client
    flashed its own, and one its power-on attaches (a key it never reads would boot
    SeaBIOS, or nothing on aarch64)."""
    on = inspect.getsource(QemuPower.on)
    for arch in ("x86_64", "aarch64"):
        config = _config("exporter", arch, "uefi")
        driver = Qemu(**config)
        try:
            assert config["default_partitions"], arch
            for key, path in config["default_partitions"].items():
                assert f'validate_partition("{key}", use_default_partitions=True)' in on
                resolved = driver.validate_partition(key, use_default_partitions=True)
                assert str(resolved) == path
        finally:
            driver.close()


def test_a_drivers_own_partitions_win() -> None:
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    own = {"OVMF_CODE.fd": "/mine/CODE.fd", "OVMF_VARS.fd": "/mine/VARS.fd"}
    exporter_set["spec"]["template"]["spec"]["drivers"][0]["config"] = {
        "arch": "aarch64",
        "default_partitions": own,
    }
    config = rendered_config(exporter_set, EXAMPLE_CLASS)["export"]["qemu"]["config"]
    assert config["default_partitions"] == own


def test_an_unknown_firmware_type_is_denied_with_the_known_ones() -> None:
    klass = _class({"firmware": {"type": "coreboot"}})
    (error,) = check_class(klass).errors
    assert str(error).startswith('spec.parameters.firmware.type: Invalid value: "coreboot"')
    assert "'bios' or 'uefi'" in str(error)


def _class(parameters: dict[str, Any], image: str = QEMU_EXPORTER_IMAGE) -> dict[str, Any]:
    return a_class(parameters=parameters, images=exporter_image(image))


def test_bios_on_aarch64_is_refused_naming_the_parameter_and_the_image() -> None:
    expected = (
        'spec.parameters.firmware.type: Invalid value: "bios": arch aarch64 boots only UEFI '
        "(AAVMF): QEMU's virt machine has no BIOS, in the exporter image "
        f"{QEMU_EXPORTER_IMAGE} or any other; use uefi or leave it unset"
    )
    aarch64_bios = {"arch": "aarch64", "firmware": {"type": "bios"}}
    assert [str(e) for e in check_class(_class(aarch64_bios)).errors] == [expected]
    # Merged: the class names the architecture, the set the firmware.
    outcome = validate(
        [_class({"arch": "aarch64"})], pool([QEMU], parameters={"firmware": {"type": "bios"}})
    )
    assert [str(e) for e in outcome.errors] == [expected]
    # The set may move the pool back to x86_64, where SeaBIOS boots it.
    x86 = pool([QEMU], parameters={"arch": "x86_64", "firmware": {"type": "bios"}})
    assert validate([_class({"arch": "aarch64"})], x86).allowed


@pytest.mark.parametrize(
    ("parameters", "warning"),
    [
        (
            {"arch": "aarch64"},
            "spec.parameters.arch: aarch64 needs qemu-system-aarch64 and AAVMF; "
            f"not shipped here: {OTHER}",
        ),
        (
            {"firmware": {"type": "uefi"}},
            "spec.parameters.firmware.type: uefi needs /usr/share/OVMF/OVMF_CODE_4M.fd; "
            f"not shipped here: {OTHER}",
        ),
        ({"firmware": {"type": "bios"}}, None),  # QEMU's own SeaBIOS: any x86_64 QEMU has it
        ({}, None),
    ],
)
def test_an_image_not_shipped_here_is_warned_of_where_the_guest_needs_more(
    parameters: dict[str, Any], warning: str | None
) -> None:
    exporter_layout = {"layout": "exporter", **parameters}
    expected = [warning] if warning else []
    assert check_class(_class(exporter_layout, OTHER)).warnings == expected
    outcome = validate([_class(exporter_layout, OTHER)], pool([QEMU]))
    assert outcome.allowed and outcome.warnings == expected
    assert all(len(w) <= 120 for w in outcome.warnings)
    # The image this project ships boots it; unset, the layout may be main's sidecar.
    assert validate([_class(exporter_layout)], pool([QEMU])).warnings == []
    assert validate([_class(parameters, OTHER)], pool([QEMU])).warnings == []


def test_the_published_image_keeps_its_one_warning() -> None:
    """It has no QEMU at all: the firmware's warning would say less."""
    klass = _class({"layout": "exporter", "arch": "aarch64"}, RELEASED)
    assert check_class(klass).warnings == []
    assert validate([klass], pool([QEMU])).warnings == [
        f"spec.images.exporter: {RELEASED} has no QEMU, which layout exporter runs there"
    ]


def test_bios_named_in_the_sidecar_layout_is_warned_of() -> None:
    main = "quay.io/jumpstarter-dev/jumpstarter:latest"
    klass = _class({"layout": "sidecar", "firmware": {"type": "bios"}}, main)
    warning = (
        "spec.parameters.firmware.type: bios not read: layout sidecar names main's OVMF, which "
        "main's driver uses only if the exporter image holds it (main's own does not: SeaBIOS)"
    )
    assert check_class(klass).warnings == [warning]
    assert validate([klass], pool([QEMU])).warnings == [warning]
