"""The QEMU exporter image this project ships (images/qemu-exporter): what its Dockerfile
and pins say, under the name a class gives it. Built and run on the node tier."""

from __future__ import annotations

import re

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.images import QEMU_EXPORTER_CONTEXT
from pool.model.jumpstarter import JUMPSTARTER_RELEASE, QEMU_DRIVER, TCP_NETWORK_DRIVER
from tests.exporters import DRIVERS

DOCKERFILE = (QEMU_EXPORTER_CONTEXT / "Dockerfile").read_text()
REQUIREMENTS = QEMU_EXPORTER_CONTEXT / "requirements.txt"


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


def test_the_image_is_named_and_labelled_for_what_it_is() -> None:
    assert QEMU_EXPORTER_IMAGE.endswith(f":{JUMPSTARTER_RELEASE}")
    assert QEMU_EXPORTER_IMAGE.rsplit(":", 1)[0] in DOCKERFILE
    for label in (
        "virtualtarget.jumpstarter.dev/jumpstarter=",
        "virtualtarget.jumpstarter.dev/qemu=",
    ):
        assert label in DOCKERFILE
    assert "Not Jumpstarter's published image, which carries no QEMU" in DOCKERFILE


def test_it_carries_both_emulators_qemu_img_and_the_firmware_from_debian() -> None:
    install = re.search(r"apt-get install -y --no-install-recommends \\\n([^\\\n]+)", DOCKERFILE)
    assert install is not None, DOCKERFILE
    assert install.group(1).split() == [
        "qemu-system-x86",
        "qemu-system-arm",  # qemu-system-aarch64
        "qemu-utils",
        "seabios",
        "ovmf",
        "qemu-efi-aarch64",  # AAVMF
        "ipxe-qemu",  # efi-virtio.rom, for the driver's virtio-net-pci under UEFI
    ]


def test_it_pins_the_release_and_every_driver_the_pools_use() -> None:
    pins = _pins()
    jumpstarter = {name: v for name, v in pins.items() if name.startswith("jumpstarter")}
    assert set(jumpstarter.values()) == {JUMPSTARTER_RELEASE}
    wanted = {_distribution(d["type"]) for d in DRIVERS} | {
        _distribution(QEMU_DRIVER),
        _distribution(TCP_NETWORK_DRIVER),
        "jumpstarter-cli",  # jmp run
        "jumpstarter-driver-composite",  # jmp run wraps the export in a Composite
        "qemu-qmp",  # the QEMU driver's QMP client
    }
    assert wanted <= set(pins), f"missing from {REQUIREMENTS}: {sorted(wanted - set(pins))}"


def test_its_user_is_the_one_the_pod_runs_jmp_run_as() -> None:
    from pool.model.jumpstarter import EXPORTER_UID

    assert f"USER {EXPORTER_UID}:{EXPORTER_UID}" in DOCKERFILE
