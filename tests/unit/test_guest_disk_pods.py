"""The guest's disk in the instance Pod, in both layouts and both kinds of volume.

`sidecar` is rendered exactly as Jumpstarter main's exporter-set controller renders it
(change #928 at f82dff04: `disk.Volume`, `disk.Mount`, `disk.SetEphemeralStorage` and the
fsGroup in `provisioners/qemu/qemu.go`'s RenderPod; its own tests' figures: 11Gi for the
defaults, 22Gi for 20Gi on a class). `exporter` gives the same volume to the directory
release 0.9.0's QEMU driver keeps its disk in: checked against the driver itself.
"""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path
from typing import Any

import pytest
from jumpstarter_driver_qemu.driver import Qemu

from pool.model.jumpstarter import EXPORTER_UID
from pool.rendering.provisioners.qemu import TMP_DIR
from tests.instance_pods import instance_pod

DISK_MOUNT = {"name": "disk", "mountPath": "/disk"}
LOCAL = {"storageClassName": "local-disks"}


def _containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = pod["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}


def _volume(pod: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in pod["spec"]["volumes"] if v["name"] == "disk")


def test_sidecar_defaults_are_mains_sized_emptydir_on_the_runtime() -> None:
    pod = instance_pod("ns", layout="sidecar")
    containers = _containers(pod)
    assert _volume(pod) == {"name": "disk", "emptyDir": {"sizeLimit": "11Gi"}}
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["shared", "disk", "exporter-config"]
    runtime, exporter = containers["target-runtime"], containers["exporter"]
    assert runtime["resources"] == {
        "requests": {"ephemeral-storage": "11Gi"},
        "limits": {"ephemeral-storage": "11Gi"},
    }
    assert "resources" not in exporter  # reserved once: the scheduler sums every container
    assert DISK_MOUNT in runtime["volumeMounts"] and DISK_MOUNT in exporter["volumeMounts"]
    assert DISK_MOUNT not in containers["copy-jumpstarter-exec"]["volumeMounts"]
    assert "securityContext" not in pod["spec"]


def test_sidecar_on_a_storage_class_is_a_generic_ephemeral_volume_with_fsgroup() -> None:
    pod = instance_pod("ns", layout="sidecar", parameters={"storage": {"size": "20Gi", **LOCAL}})
    claim = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "local-disks",
        "resources": {"requests": {"storage": "22Gi"}},  # 20Gi and 10%
    }
    assert _volume(pod) == {"name": "disk", "ephemeral": {"volumeClaimTemplate": {"spec": claim}}}
    assert pod["spec"]["securityContext"] == {"fsGroup": EXPORTER_UID} == {"fsGroup": 65532}
    for container in _containers(pod).values():
        assert "ephemeral-storage" not in str(container.get("resources"))


def test_class_resources_win_and_the_disk_fills_only_what_they_leave() -> None:
    scheduling = {
        "resources": {"requests": {"cpu": "2", "ephemeral-storage": "30Gi"}, "limits": {"cpu": "4"}}
    }
    for layout, qemu in (("sidecar", "target-runtime"), ("exporter", "exporter")):
        pod = instance_pod("ns", layout=layout, scheduling=scheduling)
        resources = _containers(pod)[qemu]["resources"]
        assert resources["requests"]["ephemeral-storage"] == "30Gi"  # the class's
        assert resources["limits"] == {"cpu": "4", "ephemeral-storage": "11Gi"}


def test_the_set_overrides_the_class_and_an_explicit_empty_class_is_an_emptydir() -> None:
    pod = instance_pod(
        "ns",
        layout="sidecar",
        parameters={"storage": {"size": "20Gi", "fsOverhead": "0%", **LOCAL}},
        set_parameters={"storage": {"storageClassName": ""}},
    )
    assert _volume(pod) == {"name": "disk", "emptyDir": {"sizeLimit": "20Gi"}}


def test_exporter_layout_gives_the_drivers_temporary_directory_the_disk() -> None:
    for parameters, volume, security in (
        ({}, {"name": "disk", "emptyDir": {"sizeLimit": "11Gi"}}, None),
        (
            {"storage": {"accessModes": ["ReadWriteOncePod"], **LOCAL}},
            {
                "name": "disk",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOncePod"],
                            "storageClassName": "local-disks",
                            "resources": {"requests": {"storage": "11Gi"}},
                        }
                    }
                },
            },
            {"fsGroup": EXPORTER_UID},
        ),
    ):
        pod = instance_pod("ns", layout="exporter", parameters=parameters)
        (exporter,) = pod["spec"]["containers"]
        assert exporter["env"] == [{"name": "TMPDIR", "value": "/disk"}]
        assert exporter["volumeMounts"][0] == DISK_MOUNT
        assert [v["name"] for v in pod["spec"]["volumes"]] == ["disk", "exporter-config"]
        assert _volume(pod) == volume
        assert pod["spec"].get("securityContext") == security
        requests = exporter.get("resources", {}).get("requests", {})
        assert ("ephemeral-storage" in requests) is (security is None)


def test_the_legacy_resources_storage_still_sizes_the_disk() -> None:
    pod = instance_pod("ns", layout="exporter", parameters={"resources": {"storage": "20Gi"}})
    assert _volume(pod) == {"name": "disk", "emptyDir": {"sizeLimit": "22Gi"}}


def test_release_0_9_0_keeps_the_disk_in_a_temporary_directory_under_tmpdir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Facts of 0.9.0's driver the `exporter` layout rests on: each driver object makes its
    own `TemporaryDirectory()` under TMPDIR and flashes `root` into it; the directory is
    removed once the object is gone (jmp run makes one per lease's session), which is why a
    retained instance keeps its volume but not what 0.9.0's driver wrote into it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    monkeypatch.setenv("TMPDIR", str(disk))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert TMP_DIR == "/disk"
    driver = Qemu()
    root = driver.validate_partition("root")
    assert root.parent.parent == disk and root.name == "root"
    root.write_bytes(b"guest")
    directory = root.parent
    driver.close()
    del driver, root
    gc.collect()  # the driver's children point back at it: a cycle
    assert not directory.exists()
