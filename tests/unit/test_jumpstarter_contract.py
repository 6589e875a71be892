"""What the reconciler renders for an instance, checked against the real Jumpstarter packages
(release `JUMPSTARTER_RELEASE`, pinned as test dependencies): the config Secret's
ExporterConfig loads with Jumpstarter's own model, every driver of its export tree
instantiates with its real class, untouched (and every `ref` resolves), and the Pod runs
`jmp run` with the options and paths that command reads.

The default layout (`exporter`) is what release 0.9.0 runs. Jumpstarter main's `sidecar`
layout is rendered as main renders it; that its QEMU entries need an exporter built from
main (0.9.0's driver refuses `launcher_socket`) is asserted as a fact, so a release that
reads the key is noticed. One key of ours the 0.9.0 model does not read, `exitOnLeaseEnd`,
is asserted as such.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from jumpstarter.config.exporter import (
    ExporterConfigV1Alpha1,
    ExporterConfigV1Alpha1DriverInstance,
)
from jumpstarter.driver import Driver
from jumpstarter_driver_network.driver import TcpNetwork
from jumpstarter_driver_qemu.driver import Qemu

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE, Layout, qemu_size
from api.provisioners.qemu_firmware import EXPORTER_FIRMWARE, RUNTIME_FIRMWARE
from api.quantity import parse_quantity
from pool.model.jumpstarter import (
    CONFIG_DIR,
    CONFIG_FILE,
    CONFIG_KEY,
    EXPORTER_UID,
    JUMPSTARTER_RELEASE,
    LAUNCHER_SOCKET,
    QEMU_DRIVER,
    TCP_NETWORK_DRIVER,
)
from pool.model.keys import NAME_LABEL, SET_LABEL
from pool.model.views import RecycleStrategy
from pool.rendering.provisioners.qemu import (
    DEFAULT_IMAGES,
    TMP_DIR,
    QemuProvisioner,
)
from pool.rendering.render import (
    Credentials,
    instance_context,
    render_config_secret,
    render_exporter,
)

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = QemuProvisioner()
CREDENTIALS = Credentials(
    "grpc.jumpstarter.example.com:443", "t0k3n", base64.b64encode(b"PEM").decode()
)
# Keys our ExporterConfig carries that release 0.9.0's model does not read.
NOT_READ_BY_0_9_0 = {"exitOnLeaseEnd"}


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "examples" / name).read_text())
    return document


EXAMPLE_SET = _load("exporterset-qemu.yaml")
EXAMPLE_CLASS = _load("virtualtargetclass-qemu.yaml")


def _with_layout(klass: dict[str, Any], layout: str | None) -> dict[str, Any]:
    changed = copy.deepcopy(klass)
    if layout is None:
        changed["spec"]["parameters"].pop("layout", None)
    else:
        changed["spec"]["parameters"]["layout"] = layout
    return changed


SIDECAR_CLASS = _with_layout(EXAMPLE_CLASS, "sidecar")


def _exporter(exporter_set: dict[str, Any], name: str = "fedora-x86-0") -> dict[str, Any]:
    exporter = render_exporter(exporter_set, "fedora-x86-")
    exporter["metadata"] |= {"name": name, "uid": "3f1c-exporter"}  # as the apiserver makes it
    return exporter


def _context(exporter_set: dict[str, Any], klass: dict[str, Any]) -> Any:
    return instance_context(
        exporter_set, klass, _exporter(exporter_set), DEFAULT_IMAGES, CREDENTIALS
    )


def rendered_config(exporter_set: dict[str, Any], klass: dict[str, Any]) -> dict[str, Any]:
    ctx = _context(exporter_set, klass)
    secret = render_config_secret(ctx, PLUGIN.drivers(ctx))
    text = base64.b64decode(secret["data"][CONFIG_KEY]).decode()
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def load_with_jumpstarter(config: dict[str, Any]) -> ExporterConfigV1Alpha1:
    """Jumpstarter's model of the config, after checking what it ignores."""
    known = {f.alias or name for name, f in ExporterConfigV1Alpha1.model_fields.items()}
    assert set(config) - known == NOT_READ_BY_0_9_0
    return ExporterConfigV1Alpha1.model_validate(config)


def instantiate_export(export: dict[str, Any]) -> Driver:
    """The export tree as `jmp run` builds it (a Composite root), every `ref` resolved."""
    root = ExporterConfigV1Alpha1DriverInstance.model_validate(
        {"type": "jumpstarter_driver_composite.driver.Composite", "children": export}
    ).instantiate()
    root.enumerate()  # resolves each Proxy (`ref`) against the tree, or raises
    return root


def test_example_config_loads_and_every_driver_instantiates() -> None:
    config = load_with_jumpstarter(rendered_config(EXAMPLE_SET, EXAMPLE_CLASS))
    assert (config.metadata.name, config.metadata.namespace) == ("fedora-x86-0", "default")
    assert (config.endpoint, config.token, config.tls.ca) == (
        CREDENTIALS.endpoint,
        CREDENTIALS.token,
        CREDENTIALS.ca,
    )
    export = {k: v.model_dump(exclude_defaults=True) for k, v in config.export.items()}
    assert list(export) == ["qemu", "power", "serial", "tcp"]
    assert export["power"] == {"ref": "qemu.power"}
    root = instantiate_export(export)
    assert isinstance(root.children["qemu"], Qemu)
    assert isinstance(root.children["tcp"], TcpNetwork)
    root.close()


def test_qemu_entry_gets_the_pool_settings_where_its_config_is_silent() -> None:
    """The default layout: what 0.9.0's driver reads, and nothing it refuses; QEMU's own
    firmware (SeaBIOS) boots the guest, so no firmware path is rendered."""
    qemu = rendered_config(EXAMPLE_SET, EXAMPLE_CLASS)["export"]["qemu"]
    config = qemu["config"]
    assert config == {
        "hostname": "fedora",  # the template's own
        "arch": "x86_64",
        "smp": 2,
        "mem": "8G",  # the set's 8Gi over the class's 4Gi
        "disk_size": "20G",  # the class's storage.size
        "hostfwd": {"ssh": {"hostaddr": "127.0.0.1", "hostport": 2222, "guestport": 22}},
    }
    driver = Qemu(**config)  # the entry as rendered
    assert driver._parse_size(driver.mem) == parse_quantity("8Gi")
    assert driver._parse_size(str(driver.disk_size)) == parse_quantity("20Gi")
    assert driver.default_partitions == {}
    driver.close()


def test_each_entry_point_defaults_to_the_layout_of_the_jumpstarter_beside_it() -> None:
    """`virtualtarget reconcile`: the release's; `exporter-set-controller`, which only
    Jumpstarter main's operator runs: main's."""
    import argparse

    from pool.rendering.provisioners import provisioner
    from reconciler import cli
    from reconciler.exporter_set_controller import reconcile_args

    parser = argparse.ArgumentParser()
    cli.configure(parser)
    assert parser.parse_args([]).qemu_layout == "exporter"
    _, operator = reconcile_args(["--provisioner=qemu.jumpstarter.dev"], "lab")
    assert operator.qemu_layout == "sidecar"
    plugin = provisioner(operator.provisioner, qemu_layout=operator.qemu_layout)
    assert isinstance(plugin, QemuProvisioner) and plugin.default_layout is Layout.SIDECAR


def test_an_unset_layout_is_the_entry_points_default() -> None:
    klass = _with_layout(EXAMPLE_CLASS, None)
    default = rendered_config(EXAMPLE_SET, klass)["export"]["qemu"]["config"]
    assert "launcher_socket" not in default
    ctx = _context(EXAMPLE_SET, klass)
    under_operator = QemuProvisioner(Layout.SIDECAR).drivers(ctx)
    assert under_operator[0]["config"]["launcher_socket"] == LAUNCHER_SOCKET
    assert "initContainers" in QemuProvisioner(Layout.SIDECAR).render_pod(ctx)["spec"]
    # A pool that names its layout gets it whatever the entry point's default.
    named = _context(EXAMPLE_SET, EXAMPLE_CLASS)  # layout: exporter
    assert "launcher_socket" not in QemuProvisioner(Layout.SIDECAR).drivers(named)[0]["config"]


def _own_qemu_config(layout: str) -> dict[str, Any]:
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    own = {
        "arch": "aarch64",
        "mem": "1G",
        "launcher_socket": "/elsewhere",
        "hostfwd": {"web": {"hostport": 8080, "guestport": 80}},
    }
    exporter_set["spec"]["template"]["spec"]["drivers"][0]["config"] = own
    klass = _with_layout(EXAMPLE_CLASS, layout)
    config: dict[str, Any] = rendered_config(exporter_set, klass)["export"]["qemu"]["config"]
    return config


def test_the_drivers_own_config_wins_and_the_layout_owns_launcher_socket() -> None:
    exporter = _own_qemu_config("exporter")
    assert (exporter["arch"], exporter["mem"]) == ("aarch64", "1G")
    assert "launcher_socket" not in exporter
    assert exporter["default_partitions"] == EXPORTER_FIRMWARE["aarch64"]  # the driver's arch
    assert set(exporter["hostfwd"]) == {"web", "ssh"}
    sidecar = _own_qemu_config("sidecar")
    assert (sidecar["arch"], sidecar["mem"], sidecar["launcher_socket"]) == (
        "aarch64",
        "1G",
        LAUNCHER_SOCKET,
    )
    assert sidecar["default_partitions"] == RUNTIME_FIRMWARE["aarch64"]
    assert set(sidecar["hostfwd"]) == {"web", "ssh"}


def test_tcp_is_added_only_when_the_template_has_no_tcp_network_driver() -> None:
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    drivers = exporter_set["spec"]["template"]["spec"]["drivers"]
    drivers.append(
        {"name": "ssh", "type": TCP_NETWORK_DRIVER, "config": {"host": "10.0.0.1", "port": 22}}
    )
    export = rendered_config(exporter_set, EXAMPLE_CLASS)["export"]
    assert "tcp" not in export and export["ssh"]["config"]["host"] == "10.0.0.1"


def test_the_sidecar_layout_is_mains_and_needs_an_exporter_built_from_main() -> None:
    """As Jumpstarter main renders it: `launcher_socket` and main's firmware paths. Release
    0.9.0's driver refuses that one key (admission refuses such a pool on a 0.9.0 image)."""
    config = rendered_config(EXAMPLE_SET, SIDECAR_CLASS)["export"]["qemu"]["config"]
    assert config["launcher_socket"] == LAUNCHER_SOCKET
    assert config["default_partitions"] == RUNTIME_FIRMWARE["x86_64"]
    fields = {f.name for f in dataclasses.fields(Qemu)}
    assert set(config) - fields == {"launcher_socket"}
    with pytest.raises(TypeError, match="launcher_socket"):
        Qemu(**config)


def test_exit_on_lease_end_follows_the_recycle_strategy() -> None:
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    assert rendered_config(exporter_set, EXAMPLE_CLASS)["exitOnLeaseEnd"] is True
    exporter_set["spec"]["recycleStrategy"] = RecycleStrategy.IN_PLACE_REUSE
    assert rendered_config(exporter_set, EXAMPLE_CLASS)["exitOnLeaseEnd"] is False


def test_config_secret_is_owned_by_the_exporter_and_labelled_for_the_set() -> None:
    ctx = _context(EXAMPLE_SET, EXAMPLE_CLASS)
    secret = render_config_secret(ctx, PLUGIN.drivers(ctx))
    meta = secret["metadata"]
    assert meta["name"] == "exporter-config-fedora-x86-0"
    assert meta["labels"] == {NAME_LABEL: "fedora-x86"}  # exactly Jumpstarter's
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "jumpstarter.dev/v1alpha1",
            "kind": "Exporter",
            "name": "fedora-x86-0",
            "uid": "3f1c-exporter",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert set(secret["data"]) == {CONFIG_KEY}


def _container_mounts(container: dict[str, Any]) -> dict[str, Any]:
    return {m["name"]: m for m in container["volumeMounts"]}


def _check_pod_common(pod: dict[str, Any], klass: dict[str, Any]) -> dict[str, Any]:
    """What both layouts share: `jmp run` as the exporter image's user on the mounted
    config, the class's scheduling, the Pod's name, owner and labels."""
    spec = pod["spec"]
    (exporter,) = spec["containers"]
    assert exporter["name"] == "exporter"
    assert exporter["command"] == ["jmp", "run", "--exporter-config", CONFIG_FILE]
    assert exporter["securityContext"]["runAsUser"] == EXPORTER_UID
    assert exporter["securityContext"]["runAsNonRoot"] is True
    assert _container_mounts(exporter)["exporter-config"] == {
        "name": "exporter-config",
        "mountPath": CONFIG_DIR,
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["exporter-config"]["secret"] == {"secretName": "exporter-config-fedora-x86-0"}
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == klass["spec"]["scheduling"]["nodeSelector"]
    assert spec["tolerations"] == klass["spec"]["scheduling"]["tolerations"]
    meta = pod["metadata"]
    assert meta["name"] == "fedora-x86-0" and meta["ownerReferences"][0]["kind"] == "Exporter"
    assert meta["annotations"] == {"jumpstarter.dev/owner-team": "ci"}
    assert meta["labels"]["jumpstarter.dev/pool"] == "fedora-x86"
    assert meta["labels"][NAME_LABEL] == "fedora-x86" and SET_LABEL not in meta["labels"]
    return exporter


def test_the_default_pod_runs_qemu_in_the_exporters_container_sized_for_the_guest() -> None:
    klass = copy.deepcopy(EXAMPLE_CLASS)
    klass["spec"]["credentialsSecretRef"] = {"name": "creds"}
    pod = PLUGIN.render_pod(_context(EXAMPLE_SET, klass))
    spec = pod["spec"]
    exporter = _check_pod_common(pod, klass)
    assert "initContainers" not in spec  # no sidecar, no exec helper
    assert exporter["image"] == QEMU_EXPORTER_IMAGE
    # The guest: 2 vCPUs, 8Gi (the set's); the class's KVM device limit kept as given; its
    # disk (20Gi and 10%) the emptyDir's ephemeral storage.
    assert exporter["resources"] == {
        "limits": {"devices.kubevirt.io/kvm": 1, "ephemeral-storage": "22Gi"},
        "requests": {"cpu": "2", "memory": "8448Mi", "ephemeral-storage": "22Gi"},
    }
    # The driver's temporary directory, where it keeps the guest's disk and its sockets,
    # is the disk volume.
    assert TMP_DIR == "/disk"
    assert exporter["env"] == [{"name": "TMPDIR", "value": TMP_DIR}]
    assert _container_mounts(exporter)["disk"] == {"name": "disk", "mountPath": "/disk"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["disk"] == {"name": "disk", "emptyDir": {"sizeLimit": "22Gi"}}
    assert [v["name"] for v in spec["volumes"]] == ["disk", "exporter-config"]
    assert "securityContext" not in spec  # an emptyDir needs no fsGroup
    assert exporter["envFrom"] == [{"secretRef": {"name": "creds"}}]
    assert exporter["securityContext"] == {
        "runAsUser": EXPORTER_UID,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_guest_sized_requests_fill_only_what_the_class_leaves_unsaid() -> None:
    from api.provisioners.qemu import QemuResources
    from pool.rendering.provisioners.qemu import guest_resources

    guest = QemuResources(cpu=1, memory="256Mi")
    assert guest_resources(guest) == {"requests": {"cpu": "1", "memory": "512Mi"}}
    given = {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}
    assert guest_resources(guest, given) == given  # a request or limit named: kept as is
    assert guest_resources(None, given) == given
    assert guest_resources(None) == {}


def test_the_drivers_sockets_fit_a_unix_socket_path_in_the_pods_temporary_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The driver keeps QMP, serial and VNC in a `TemporaryDirectory()` under TMPDIR, and
    `jmp run` its session sockets (`TemporarySocket`): each path must stay under the
    108 bytes of a unix socket address. Measured with the Pod's TMPDIR's length."""
    import tempfile

    from jumpstarter.common import TemporarySocket

    here = tmp_path / "t"
    here.mkdir()
    assert len(str(here)) >= len(TMP_DIR)
    monkeypatch.setenv("TMPDIR", str(here))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    qemu = rendered_config(EXAMPLE_SET, EXAMPLE_CLASS)["export"]["qemu"]["config"]
    driver = Qemu(**qemu)
    with TemporarySocket() as session:
        paths = [driver._qmp, driver._vnc, driver._pty, str(session)]
    driver.close()
    for path in paths:
        in_pod = TMP_DIR + path.removeprefix(str(here))
        assert path.startswith(str(here)) and len(in_pod.encode()) < 108, in_pod


def test_the_sidecar_pod_runs_jmp_run_beside_the_runtime_sidecar_as_main_does() -> None:
    klass = copy.deepcopy(SIDECAR_CLASS)
    klass["spec"]["credentialsSecretRef"] = {"name": "creds"}
    klass["spec"]["scheduling"]["resources"] = {"requests": {"cpu": "2"}}
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    exporter_set["spec"]["images"] = {"runtime": {"image": "example.com/set-runtime:1"}}
    pod = PLUGIN.render_pod(_context(exporter_set, klass))
    spec = pod["spec"]
    exporter = _check_pod_common(pod, klass)
    init = {c["name"]: c for c in spec["initContainers"]}
    assert list(init) == ["copy-jumpstarter-exec", "target-runtime"]
    assert init["copy-jumpstarter-exec"]["image"] == QEMU_EXPORTER_IMAGE  # the class's
    assert init["copy-jumpstarter-exec"]["command"] == [
        "cp",
        "/jumpstarter/bin/jumpstarter-exec",
        "/shared/",
    ]
    runtime = init["target-runtime"]
    assert runtime["restartPolicy"] == "Always"  # a native sidecar
    assert runtime["image"] == "example.com/set-runtime:1"  # set over class
    assert runtime["securityContext"]["runAsUser"] == 0
    # The class's resources, and the emptyDir disk's 22Gi (20Gi and 10%) on the container
    # that runs QEMU only: the scheduler sums every container's requests.
    assert runtime["resources"] == {
        "requests": {"cpu": "2", "ephemeral-storage": "22Gi"},
        "limits": {"ephemeral-storage": "22Gi"},
    }
    assert "resources" not in exporter
    assert runtime["env"] == [
        {
            "name": "JUMPSTARTER_EXEC_LOG_FIELDS",
            "value": "component=exporter,exporter=fedora-x86-0,namespace=default",
        }
    ]
    assert exporter["image"] == QEMU_EXPORTER_IMAGE
    assert exporter["env"] == [{"name": "JUMPSTARTER_LAUNCHER_SOCKET", "value": LAUNCHER_SOCKET}]
    shared = {"name": "shared", "mountPath": "/shared"}
    for container in (init["copy-jumpstarter-exec"], runtime, exporter):
        assert shared in container["volumeMounts"]
    assert runtime["envFrom"] == exporter["envFrom"] == [{"secretRef": {"name": "creds"}}]
    disk = {"name": "disk", "mountPath": "/disk"}
    assert disk in runtime["volumeMounts"] and disk in exporter["volumeMounts"]
    assert disk not in init["copy-jumpstarter-exec"]["volumeMounts"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["shared"] == {"name": "shared", "emptyDir": {"sizeLimit": "100Mi"}}
    assert volumes["disk"] == {"name": "disk", "emptyDir": {"sizeLimit": "22Gi"}}
    assert [v["name"] for v in spec["volumes"]] == ["shared", "disk", "exporter-config"]


def test_pod_uses_the_paths_and_options_jumpstarter_reads() -> None:
    # `jmp run` reads `--exporter-config PATH` (asked of the installed command in a child
    # process: importing jumpstarter_cli injects truststore into this process's ssl
    # module); the file sits where Jumpstarter keeps system-wide exporter configs.
    jmp = Path(sys.executable).parent / "jmp"
    usage = subprocess.run([str(jmp), "run", "--help"], capture_output=True, text=True)
    assert usage.returncode == 0, usage.stderr
    assert "--exporter-config PATH" in usage.stdout
    assert Path(CONFIG_DIR) == ExporterConfigV1Alpha1.SYSTEM_CONFIG_PATH
    assert f"{TcpNetwork.__module__}.{TcpNetwork.__qualname__}" == TCP_NETWORK_DRIVER
    assert f"{Qemu.__module__}.{Qemu.__qualname__}" == QEMU_DRIVER


def test_default_images_and_test_pins_follow_one_release() -> None:
    assert DEFAULT_IMAGES["exporter"].image == (
        f"quay.io/jumpstarter-dev/jumpstarter:{JUMPSTARTER_RELEASE}"
    )
    assert DEFAULT_IMAGES["runtime"].image == (
        f"quay.io/jumpstarter-dev/virtual/qemu-runtime:{JUMPSTARTER_RELEASE}"
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [d for d in project["project"]["optional-dependencies"]["dev"] if "jumpstarter" in d]
    assert len(pins) == 5  # jumpstarter, its CLI and the three driver packages
    assert all(pin.endswith(f"=={JUMPSTARTER_RELEASE}") for pin in pins)


# -- generated combinations ------------------------------------------------------------

SIZES_MI = st.integers(min_value=128, max_value=64 * 1024)
GIBIBYTES = st.integers(min_value=1, max_value=2048).map(lambda g: f"{g}Gi")


def _quantity(mebibytes: int) -> str:
    return f"{mebibytes // 1024}Gi" if mebibytes % 1024 == 0 else f"{mebibytes}Mi"


PARAMETERS = st.fixed_dictionaries(
    {},
    optional={
        "arch": st.sampled_from(["x86_64", "aarch64"]),
        "layout": st.just("exporter"),  # the default, named
        "machineType": st.sampled_from(["q35", "virt", "pc-q35-9.2"]),
        "firmware": st.fixed_dictionaries(
            {"url": st.just("quay.io/example/firmware:1")},
            optional={"digest": st.just("sha256:" + "ab" * 32)},
        ),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "cpu": st.integers(min_value=1, max_value=64),
                "memory": SIZES_MI.map(_quantity),
                "storage": GIBIBYTES,  # the disk's key before `storage.size`
            },
        ),
        "storage": st.fixed_dictionaries(
            {},
            optional={
                "size": GIBIBYTES,
                "fsOverhead": st.sampled_from(["0%", "10%", " 25 %", ""]),
                "storageClassName": st.sampled_from(["", "local-disks"]),
                "accessModes": st.sampled_from([["ReadWriteOnce"], ["ReadWriteOncePod"]]),
            },
        ),
    },
)
OTHER_DRIVERS = {
    "power": {"type": "jumpstarter_driver_power.driver.MockPower"},
    "serial": {"type": "jumpstarter_driver_pyserial.driver.PySerial", "config": {"url": "loop://"}},
    "net": {"type": TCP_NETWORK_DRIVER, "config": {"host": "127.0.0.1", "port": 22}},
}
QEMU_OWN = st.fixed_dictionaries(
    {},
    optional={
        "arch": st.sampled_from(["x86_64", "aarch64"]),
        "smp": st.integers(min_value=1, max_value=8),
        "mem": st.sampled_from(["512M", "2G"]),
        "hostname": st.just("guest"),
        "launcher_socket": st.just("/shared/launcher.sock"),  # a template written for main
    },
)


@st.composite
def templates(draw: st.DrawFn) -> list[dict[str, Any]]:
    drivers: list[dict[str, Any]] = []
    with_qemu = draw(st.booleans())
    if with_qemu:
        drivers.append({"name": "qemu", "type": QEMU_DRIVER, "config": draw(QEMU_OWN)})
    for name in draw(st.lists(st.sampled_from(sorted(OTHER_DRIVERS)), unique=True)):
        drivers.append({"name": name, **copy.deepcopy(OTHER_DRIVERS[name])})
    if with_qemu and draw(st.booleans()):
        drivers.append({"name": "console", "ref": "qemu.console"})
    return drivers


@settings(max_examples=40, deadline=None)
@given(class_parameters=PARAMETERS, set_parameters=PARAMETERS, drivers=templates())
def test_every_rendered_config_loads_and_instantiates(
    class_parameters: dict[str, Any], set_parameters: dict[str, Any], drivers: list[Any]
) -> None:
    klass = copy.deepcopy(EXAMPLE_CLASS)
    klass["spec"]["parameters"] = class_parameters
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    exporter_set["spec"]["parameters"] = set_parameters
    exporter_set["spec"]["template"]["spec"]["drivers"] = drivers
    config = load_with_jumpstarter(rendered_config(exporter_set, klass))
    export = {k: v.model_dump(exclude_defaults=True) for k, v in config.export.items()}
    assert list(export)[: len(drivers)] == [d["name"] for d in drivers]
    root = instantiate_export(export)
    qemu = root.children.get("qemu")
    if isinstance(qemu, Qemu):
        resources = {**class_parameters.get("resources", {}), **set_parameters.get("resources", {})}
        own = next(d["config"] for d in drivers if d["name"] == "qemu")
        if "memory" in resources and "mem" not in own:
            assert qemu._parse_size(qemu.mem) == parse_quantity(resources["memory"])
            assert qemu.mem == qemu_size(resources["memory"])
        storage = {**class_parameters.get("storage", {}), **set_parameters.get("storage", {})}
        # The disk the pool names: storage.size, else the legacy resources.storage.
        size = storage.get("size") or resources.get("storage")
        if size:
            assert qemu._parse_size(str(qemu.disk_size)) == parse_quantity(size)
        else:
            assert qemu.disk_size is None  # as Jumpstarter main: no resize
    root.close()
