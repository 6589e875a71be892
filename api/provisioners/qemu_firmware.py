"""Which firmware boots a QEMU pool's guest, where the image that runs QEMU keeps it, and
what admission says of a pool whose exporter image cannot boot it.

The QEMU driver (Jumpstarter 0.9.0's and main's) attaches `OVMF_CODE.fd` and
`OVMF_VARS.fd` as pflash when both partitions exist, taken from its `default_partitions`
unless a client flashed its own; without them QEMU boots its own firmware, SeaBIOS on
x86_64's q35. QEMU's aarch64 `virt` machine has no BIOS: an aarch64 guest boots UEFI
(AAVMF) or nothing.

- `aarch64`: always UEFI.
- `x86_64`: `firmware.type` (`bios` or `uefi`) where the pool names it; else each layout
  boots what its Jumpstarter boots by default. `exporter` (release 0.9.0, whose driver
  attaches no firmware of its own): SeaBIOS, so the disks that boot in those pools today
  keep booting, and faster (under TCG OVMF's start-up doubles a marker guest's boot).
  `sidecar` (main, whose exporter-set controller gives every guest UEFI): UEFI.
- `sidecar` renders exactly what main renders: UEFI from main's runtime image whatever
  `firmware.type` says (a `bios` there is warned of).

Admission (`firmware_findings`): `firmware.type: bios` with `arch: aarch64` is refused (no
image boots it). In the `exporter` layout, a guest that needs more than QEMU's x86_64
emulator and SeaBIOS (an aarch64 or UEFI guest) on an exporter image this project does
not ship (`QEMU_EXPORTER_IMAGE`) is warned of: it must carry `qemu-system-aarch64` or the
firmware at the paths rendered here. Jumpstarter's published exporter image, which carries
no QEMU at all, has its own warning (`api.provisioners.qemu_layout`). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError
from api.provisioners.qemu import QEMU_EXPORTER_IMAGE, Architecture, FirmwareType, Layout

__all__ = [
    "EXPORTER_FIRMWARE",
    "RUNTIME_FIRMWARE",
    "default_partitions",
    "firmware_findings",
    "guest_firmware",
    "named_firmware",
]


# The driver's partition names for UEFI's code and variable store.
_CODE, _VARS = "OVMF_CODE.fd", "OVMF_VARS.fd"
# UEFI in the QEMU exporter image this project ships (images/qemu-exporter: Debian's
# `ovmf` and `qemu-efi-aarch64`), by guest architecture: the `exporter` layout's.
EXPORTER_FIRMWARE: Mapping[str, Mapping[str, str]] = {
    Architecture.X86_64.value: {
        _CODE: "/usr/share/OVMF/OVMF_CODE_4M.fd",
        _VARS: "/usr/share/OVMF/OVMF_VARS_4M.fd",
    },
    Architecture.AARCH64.value: {
        _CODE: "/usr/share/AAVMF/AAVMF_CODE.fd",
        _VARS: "/usr/share/AAVMF/AAVMF_VARS.fd",
    },
}
# UEFI in Jumpstarter main's runtime image (Fedora's edk2): the `sidecar` layout's.
RUNTIME_FIRMWARE: Mapping[str, Mapping[str, str]] = {
    Architecture.X86_64.value: {
        _CODE: "/usr/share/edk2/ovmf/OVMF_CODE.fd",
        _VARS: "/usr/share/edk2/ovmf/OVMF_VARS.fd",
    },
    Architecture.AARCH64.value: EXPORTER_FIRMWARE[Architecture.AARCH64.value],
}
_FIRMWARE_TYPE = "spec.parameters.firmware.type"


def named_firmware(parameters: Any) -> FirmwareType | None:
    """The `firmware.type` the (merged) parameters name, if a known one."""
    firmware = parameters.get("firmware") if isinstance(parameters, Mapping) else None
    named = firmware.get("type") if isinstance(firmware, Mapping) else None
    return FirmwareType(named) if named in {m.value for m in FirmwareType} else None


def _arch(parameters: Any) -> str:
    arch = parameters.get("arch") if isinstance(parameters, Mapping) else None
    return arch if isinstance(arch, str) and arch else Architecture.X86_64.value


def guest_firmware(arch: str, named: FirmwareType | None, layout: Layout) -> FirmwareType:
    """What boots a guest of `arch` in `layout`, `named` by `firmware.type` or not."""
    if arch == Architecture.AARCH64.value or layout is Layout.SIDECAR:
        return FirmwareType.UEFI
    return named or FirmwareType.BIOS


def default_partitions(
    arch: str, named: FirmwareType | None, layout: Layout
) -> Mapping[str, str] | None:
    """The QEMU driver's `default_partitions` for a guest of `arch`: the layout's UEFI, or
    None where QEMU's own SeaBIOS boots it (or the architecture is not one known here)."""
    if guest_firmware(arch, named, layout) is FirmwareType.BIOS:
        return None
    firmware = RUNTIME_FIRMWARE if layout is Layout.SIDECAR else EXPORTER_FIRMWARE
    return firmware.get(arch)


def firmware_findings(
    parameters: Mapping[str, Any], exporter: str, layout: Layout | None
) -> tuple[list[FieldError], list[str]]:
    """A QEMU pool's (merged) `parameters` against its `exporter` image in the layout it
    names (None: the entry point's default, judged only where it cannot be wrong)."""
    arch, named = _arch(parameters), named_firmware(parameters)
    if arch == Architecture.AARCH64.value and named is FirmwareType.BIOS:
        detail = (
            "arch aarch64 boots only UEFI (AAVMF): QEMU's virt machine has no BIOS, in the "
            f"exporter image {exporter} or any other; use uefi or leave it unset"
        )
        return [FieldError.invalid(_FIRMWARE_TYPE, named.value, detail)], []
    if layout is Layout.SIDECAR and named is FirmwareType.BIOS:
        # Main's driver (b1f2bb4) boots the rendered OVMF only where the exporter image holds
        # it; main's own holds none and boots SeaBIOS (tests/node/test_main_stack_node.py).
        return [], [
            f"{_FIRMWARE_TYPE}: bios not read: layout sidecar names main's OVMF, which main's "
            "driver uses only if the exporter image holds it (main's own does not: SeaBIOS)"
        ]
    if layout is not Layout.EXPORTER or exporter == QEMU_EXPORTER_IMAGE:
        return [], []
    # Not the image this project ships: what it carries is not known here.
    if arch == Architecture.AARCH64.value:
        need = "qemu-system-aarch64 and AAVMF"
        return [], [f"spec.parameters.arch: aarch64 needs {need}; not shipped here: {exporter}"]
    if guest_firmware(arch, named, layout) is FirmwareType.UEFI and arch in EXPORTER_FIRMWARE:
        code = EXPORTER_FIRMWARE[arch][_CODE]
        return [], [f"{_FIRMWARE_TYPE}: uefi needs {code}; not shipped here: {exporter}"]
    return [], []
