"""`parameters.storage`, the guest's disk, as Jumpstarter main settled it (its change #928,
last public revision f82dff04: `controller/internal/exporterset/disk/disk.go`): the model
admission checks it with, the disk it resolves to, and the sizes as resource.Quantity
prints them.

The canonical spellings below were printed by k8s.io/apimachinery v0.36.3 itself (a Go
program doing what disk.go does: `NewQuantity(size.Value()*(100+p)/100, size.Format)`,
`size.DeepCopy()` at 0%, then `MarshalJSON`), so a size renders exactly as Jumpstarter's
controller sends it.
"""

from __future__ import annotations

from typing import Any

import pytest

from api.provisioners.check import check_parameters
from api.provisioners.qemu import PROVISIONER, QemuParameters
from api.provisioners.qemu_storage import (
    DEFAULT_SIZE,
    MAX_FS_OVERHEAD,
    QemuStorage,
    guest_disk,
    overhead_percent,
)
from api.quantity import canonical_bytes, quantity_format

# (size, fsOverhead percent) -> the volume as apimachinery v0.36.3 printed it.
APIMACHINERY = {
    ("10Gi", 10): "11Gi",
    ("10Gi", 0): "10Gi",
    ("20Gi", 10): "22Gi",
    ("1Gi", 10): "1181116006",
    ("7Gi", 0): "7Gi",
    ("16Gi", 10): "18897856102",
    ("1536Mi", 10): "1771674009",
    ("1.5Gi", 10): "1771674009",
    ("1G", 10): "1100M",
    ("10G", 10): "11G",
    ("10e9", 10): "11e9",
    ("10e9", 0): "10e9",
    ("1Gi", 15): "1234803097",
    ("2Ti", 10): "2418925581107",
    ("1Gi", 1000): "11Gi",
    ("1048576", 10): "1153433",
    ("1000Mi", 7): "1070Mi",
    ("3Gi", 33): "4284229877",
}


@pytest.mark.parametrize(("size", "percent"), sorted(APIMACHINERY))
def test_the_volume_is_spelled_as_resource_quantity_prints_it(size: str, percent: int) -> None:
    from api.quantity import parse_quantity

    grown = int(parse_quantity(size)) * (100 + percent) // 100
    assert canonical_bytes(grown, quantity_format(size)) == APIMACHINERY[(size, percent)]


def _errors(parameters: dict[str, Any]) -> list[str]:
    return [str(e) for e in check_parameters(PROVISIONER, parameters).errors]


def _storage(**given: Any) -> dict[str, Any]:
    return {"storage": given}


def test_defaults_give_an_eleven_gibibyte_emptydir_and_no_resize() -> None:
    for parameters in ({}, {"storage": None}, _storage(), _storage(size="", fsOverhead="")):
        params = QemuParameters.model_validate(parameters)
        disk = guest_disk(params.storage)
        assert (disk.size, disk.volume, disk.storage_class) == ("", "11Gi", "")
        assert disk.access_modes == ("ReadWriteOnce",)
    assert DEFAULT_SIZE == "10Gi"


def test_size_overhead_class_and_modes_resolve_as_upstream() -> None:
    storage = QemuStorage.model_validate(
        {
            "size": "20Gi",
            "fsOverhead": "0%",
            "storageClassName": "fast-ssd",
            "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
        }
    )
    disk = guest_disk(storage)
    assert (disk.size, disk.volume, disk.storage_class) == ("20Gi", "20Gi", "fast-ssd")
    assert disk.access_modes == ("ReadWriteOnce", "ReadWriteMany")
    assert overhead_percent(" +25 %") == 25  # Go's TrimSpace and strconv.Atoi
    assert overhead_percent(None) == overhead_percent("") == 10


def test_the_legacy_resources_storage_sizes_the_disk_where_storage_size_is_unset() -> None:
    assert guest_disk(None, "16Gi").size == "16Gi"
    assert guest_disk(QemuStorage(size="30Gi"), "16Gi").size == "30Gi"  # the new key wins
    check = check_parameters(PROVISIONER, {"resources": {"storage": "16Gi"}})
    assert check.errors == ()
    assert check.warnings == [
        "spec.parameters.resources.storage: deprecated: use spec.parameters.storage.size, "
        "which wins where both are set"
    ]
    assert all(len(w) <= 120 for w in check.warnings)


def test_storage_is_known_and_its_unknown_keys_are_warnings() -> None:
    check = check_parameters(PROVISIONER, _storage(size="10Gi", colour="red"))
    assert check.errors == ()
    known = ("size", "fsOverhead", "storageClassName", "accessModes")
    assert check.unknown == (("spec.parameters.storage.colour", known),)
    check = check_parameters(PROVISIONER, {"colour": "red"})
    known = ("arch", "machineType", "firmware", "resources", "storage", "layout")
    assert check.unknown[0][1] == known


BAD = [
    (
        _storage(size=10),
        'spec.parameters.storage.size: Invalid value: 10: must be a string such as "10Gi", '
        "not a number (qemu.jumpstarter.dev)",
    ),
    (
        _storage(size=10.5),
        'spec.parameters.storage.size: Invalid value: 10.5: must be a string such as "10Gi", '
        "not a number (qemu.jumpstarter.dev)",
    ),
    (
        _storage(size="ten"),
        'spec.parameters.storage.size: Invalid value: "ten": quantities must match the regular '
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (got 'ten') "
        "(qemu.jumpstarter.dev)",
    ),
    (
        _storage(size="512Mi"),
        'spec.parameters.storage.size: Invalid value: "512Mi": must be between 1Gi and 2Ti '
        "(qemu.jumpstarter.dev)",
    ),
    (
        _storage(fsOverhead="ten"),
        'spec.parameters.storage.fsOverhead: Invalid value: "ten": must be a whole percentage '
        'such as "10%" (qemu.jumpstarter.dev)',
    ),
    (
        _storage(fsOverhead="10"),
        'spec.parameters.storage.fsOverhead: Invalid value: "10": must be a whole percentage '
        'such as "10%" (qemu.jumpstarter.dev)',
    ),
    (
        _storage(fsOverhead="10.5%"),
        'spec.parameters.storage.fsOverhead: Invalid value: "10.5%": must be a whole '
        'percentage such as "10%" (qemu.jumpstarter.dev)',
    ),
    (
        _storage(fsOverhead="-5%"),
        'spec.parameters.storage.fsOverhead: Invalid value: "-5%": must not be negative '
        "(qemu.jumpstarter.dev)",
    ),
    (
        _storage(fsOverhead=10),
        'spec.parameters.storage.fsOverhead: Invalid value: 10: must be a string such as "10%", '
        "not a number (qemu.jumpstarter.dev)",
    ),
    (
        _storage(fsOverhead=f"{MAX_FS_OVERHEAD + 1}%"),
        f'spec.parameters.storage.fsOverhead: Invalid value: "{MAX_FS_OVERHEAD + 1}%": must be '
        f"at most {MAX_FS_OVERHEAD}% (qemu.jumpstarter.dev)",
    ),
    (
        _storage(accessModes=["ReadWriteOnce", "ReadWriteSometimes"]),
        'spec.parameters.storage.accessModes[1]: Invalid value: "ReadWriteSometimes": Input '
        "should be 'ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany' or 'ReadWriteOncePod' "
        "(qemu.jumpstarter.dev)",
    ),
    (
        _storage(accessModes=["ReadWriteOncePod", "ReadOnlyMany"]),
        'spec.parameters.storage.accessModes: Invalid value: ["ReadWriteOncePod","ReadOnlyMany"]:'
        " may not use ReadWriteOncePod with other access modes (qemu.jumpstarter.dev)",
    ),
    (
        _storage(accessModes=[]),
        "spec.parameters.storage.accessModes: Invalid value: []: List should have at least 1 "
        "item after validation, not 0 (qemu.jumpstarter.dev)",
    ),
    (
        _storage(storageClassName="Fast_SSD"),
        'spec.parameters.storage.storageClassName: Invalid value: "Fast_SSD": a lowercase RFC '
        "1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
        "must start and end with an alphanumeric character (qemu.jumpstarter.dev)",
    ),
    (
        {"storage": "20Gi"},
        'spec.parameters.storage: Invalid value: "20Gi": Input should be a valid dictionary or '
        "instance of QemuStorage (qemu.jumpstarter.dev)",
    ),
]


@pytest.mark.parametrize(("parameters", "message"), BAD)
def test_each_bad_storage_value_is_refused_naming_its_field(
    parameters: dict[str, Any], message: str
) -> None:
    assert _errors(parameters) == [message]


def test_what_upstream_accepts_is_admitted() -> None:
    for storage in (
        {"size": "20Gi", "fsOverhead": "10%", "storageClassName": "gp3"},
        {"fsOverhead": "0%"},
        {"storageClassName": ""},  # the set's explicit "" turns the class's claim off
        {"accessModes": ["ReadWriteOncePod"]},
        {"size": "1.5Gi"},
    ):
        assert _errors({"storage": storage}) == [], storage
