"""What the reconciler renders for an instance, checked against the real Jumpstarter packages
(release `JUMPSTARTER_RELEASE`, pinned as test dependencies): the config Secret's
ExporterConfig loads with Jumpstarter's own model, every driver of its export tree
instantiates with its real class (and every `ref` resolves), and the Pod runs `jmp run`
with the options and paths that command reads.

Two named exceptions, both facts of release 0.9.0, each asserted so that a release that
changes them fails here: its `Qemu` driver predates the runtime sidecar and refuses
`launcher_socket`, and its ExporterConfig model does not read `exitOnLeaseEnd`.
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

from api.provisioners.qemu import qemu_size
from api.quantity import parse_quantity
from reconciler.model.jumpstarter import (
    CONFIG_DIR,
    CONFIG_FILE,
    CONFIG_KEY,
    EXPORTER_UID,
    JUMPSTARTER_RELEASE,
    LAUNCHER_SOCKET,
    QEMU_DRIVER,
    TCP_NETWORK_DRIVER,
)
from reconciler.model.keys import NAME_LABEL, SET_LABEL
from reconciler.model.views import RecycleStrategy
from reconciler.rendering.provisioners.qemu import DEFAULT_IMAGES, FIRMWARE, QemuProvisioner
from reconciler.rendering.render import (
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
    """The export tree as `jmp run` builds it (a Composite root), every `ref` resolved.

    Release 0.9.0's Qemu refuses `launcher_socket`, so it is taken out of QEMU entries
    first (and `test_qemu_0_9_0_refuses_only_launcher_socket` keeps that the only thing
    taken out)."""
    tree = copy.deepcopy(export)
    for entry in tree.values():
        if entry.get("type") == QEMU_DRIVER:
            assert entry["config"].pop("launcher_socket") == LAUNCHER_SOCKET
    root = ExporterConfigV1Alpha1DriverInstance.model_validate(
        {"type": "jumpstarter_driver_composite.driver.Composite", "children": tree}
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
    qemu = rendered_config(EXAMPLE_SET, EXAMPLE_CLASS)["export"]["qemu"]["config"]
    assert qemu == {
        "hostname": "fedora",  # the template's own
        "launcher_socket": LAUNCHER_SOCKET,
        "arch": "x86_64",
        "smp": 2,
        "mem": "8G",  # the set's 8Gi over the class's 4Gi
        "disk_size": "16G",
        "default_partitions": FIRMWARE["x86_64"],
        "hostfwd": {"ssh": {"hostaddr": "127.0.0.1", "hostport": 2222, "guestport": 22}},
    }
    driver = Qemu(**{k: v for k, v in qemu.items() if k != "launcher_socket"})
    assert driver._parse_size(driver.mem) == parse_quantity("8Gi")
    assert driver._parse_size(str(driver.disk_size)) == parse_quantity("16Gi")
    assert {str(k): str(v) for k, v in driver.default_partitions.items()} == FIRMWARE["x86_64"]
    driver.close()


def test_the_drivers_own_config_wins_and_launcher_socket_is_always_set() -> None:
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    own = {
        "arch": "aarch64",
        "mem": "1G",
        "launcher_socket": "/elsewhere",
        "hostfwd": {"web": {"hostport": 8080, "guestport": 80}},
    }
    exporter_set["spec"]["template"]["spec"]["drivers"][0]["config"] = own
    qemu = rendered_config(exporter_set, EXAMPLE_CLASS)["export"]["qemu"]["config"]
    assert (qemu["arch"], qemu["mem"], qemu["launcher_socket"]) == (
        "aarch64",
        "1G",
        LAUNCHER_SOCKET,
    )
    assert qemu["default_partitions"] == FIRMWARE["aarch64"]  # follows the driver's arch
    assert set(qemu["hostfwd"]) == {"web", "ssh"}


def test_tcp_is_added_only_when_the_template_has_no_tcp_network_driver() -> None:
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    drivers = exporter_set["spec"]["template"]["spec"]["drivers"]
    drivers.append(
        {"name": "ssh", "type": TCP_NETWORK_DRIVER, "config": {"host": "10.0.0.1", "port": 22}}
    )
    export = rendered_config(exporter_set, EXAMPLE_CLASS)["export"]
    assert "tcp" not in export and export["ssh"]["config"]["host"] == "10.0.0.1"


def test_qemu_0_9_0_refuses_only_launcher_socket() -> None:
    config = rendered_config(EXAMPLE_SET, EXAMPLE_CLASS)["export"]["qemu"]["config"]
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


def test_pod_runs_jmp_run_with_the_mounted_config_beside_the_runtime_sidecar() -> None:
    klass = copy.deepcopy(EXAMPLE_CLASS)
    klass["spec"]["credentialsSecretRef"] = {"name": "creds"}
    exporter_set = copy.deepcopy(EXAMPLE_SET)
    exporter_set["spec"]["images"] = {"runtime": {"image": "example.com/set-runtime:1"}}
    pod = PLUGIN.render_pod(_context(exporter_set, klass))
    spec = pod["spec"]
    init = {c["name"]: c for c in spec["initContainers"]}
    assert list(init) == ["copy-jumpstarter-exec", "target-runtime"]
    assert init["copy-jumpstarter-exec"]["image"] == "quay.io/jumpstarter-dev/jumpstarter:0.9.0"
    assert init["copy-jumpstarter-exec"]["command"] == [
        "cp",
        "/jumpstarter/bin/jumpstarter-exec",
        "/shared/",
    ]
    runtime = init["target-runtime"]
    assert runtime["restartPolicy"] == "Always"  # a native sidecar
    assert runtime["image"] == "example.com/set-runtime:1"  # set over class
    assert runtime["securityContext"]["runAsUser"] == 0
    assert runtime["resources"] == klass["spec"]["scheduling"]["resources"]
    assert runtime["env"] == [
        {
            "name": "JUMPSTARTER_EXEC_LOG_FIELDS",
            "value": "component=exporter,exporter=fedora-x86-0,namespace=default",
        }
    ]
    (exporter,) = spec["containers"]
    assert exporter["name"] == "exporter"
    assert exporter["image"] == EXAMPLE_CLASS["spec"]["images"]["exporter"]["image"]
    assert exporter["command"] == ["jmp", "run", "--exporter-config", CONFIG_FILE]
    assert exporter["securityContext"]["runAsUser"] == EXPORTER_UID
    assert exporter["securityContext"]["runAsNonRoot"] is True
    assert exporter["env"] == [{"name": "JUMPSTARTER_LAUNCHER_SOCKET", "value": LAUNCHER_SOCKET}]
    mounts = {m["name"]: m for m in exporter["volumeMounts"]}
    assert mounts["exporter-config"] == {
        "name": "exporter-config",
        "mountPath": CONFIG_DIR,
        "readOnly": True,
    }
    shared = {"name": "shared", "mountPath": "/shared"}
    for container in (init["copy-jumpstarter-exec"], runtime, exporter):
        assert shared in container["volumeMounts"]
    assert runtime["envFrom"] == exporter["envFrom"] == [{"secretRef": {"name": "creds"}}]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["shared"] == {"name": "shared", "emptyDir": {"sizeLimit": "100Mi"}}
    assert volumes["exporter-config"]["secret"] == {"secretName": "exporter-config-fedora-x86-0"}
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == EXAMPLE_CLASS["spec"]["scheduling"]["nodeSelector"]
    assert spec["tolerations"] == EXAMPLE_CLASS["spec"]["scheduling"]["tolerations"]
    meta = pod["metadata"]
    assert meta["name"] == "fedora-x86-0" and meta["ownerReferences"][0]["kind"] == "Exporter"
    assert meta["annotations"] == {"jumpstarter.dev/owner-team": "ci"}
    assert meta["labels"]["jumpstarter.dev/pool"] == "fedora-x86"
    assert meta["labels"][NAME_LABEL] == "fedora-x86" and SET_LABEL not in meta["labels"]


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
    assert len(pins) == 6
    assert all(pin.endswith(f"=={JUMPSTARTER_RELEASE}") for pin in pins)


# -- generated combinations ------------------------------------------------------------

SIZES_MI = st.integers(min_value=128, max_value=64 * 1024)


def _quantity(mebibytes: int) -> str:
    return f"{mebibytes // 1024}Gi" if mebibytes % 1024 == 0 else f"{mebibytes}Mi"


PARAMETERS = st.fixed_dictionaries(
    {},
    optional={
        "arch": st.sampled_from(["x86_64", "aarch64"]),
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
                "storage": st.integers(min_value=1, max_value=2048).map(lambda g: f"{g}Gi"),
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
        if "storage" in resources:
            assert qemu._parse_size(str(qemu.disk_size)) == parse_quantity(resources["storage"])
    root.close()
