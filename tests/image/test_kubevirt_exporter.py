"""The KubeVirt exporter image (images/kubevirt-exporter), run by runc as the kubelet would
run the rendered Pod: the image's user, a read-only root, no network, the config Secret and
the credentials Secret mounted where the Pod mounts them.

What `jmp run --exporter-config` does before it reaches a controller, done by the image's
own Jumpstarter 0.9.0: `ExporterConfigV1Alpha1.load_path` of the rendered config, and the
exporter's `device_factory` (`create_exporter`: a Composite of the config's `export`,
`instantiate()`), which imports and constructs every driver. The drivers must be what
pool/rendering/provisioners/kubevirt.py renders for the guide's class; each then reads
the mounted kubeconfig as it would on its first call (no request is sent), and a local
session serves them to a client, as `jmp shell` would after a lease."""

from __future__ import annotations

import base64
import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.provisioners.kubevirt import KUBEVIRT_EXPORTER_IMAGE
from harness.images import KUBEVIRT_DRIVER_VERSION, Unpacked, build_kubevirt_exporter, unpacked
from pool.model.jumpstarter import CONFIG_DIR, CONFIG_KEY, EXPORTER_CONTAINER, run_command
from pool.rendering.provisioners.kubevirt import (
    CREDENTIALS_DIR,
    DRIVER_TYPES,
    KUBECONFIG_KEY,
    KubevirtProvisioner,
)
from pool.rendering.render import (
    Credentials,
    instance_context,
    render_config_secret,
    render_exporter,
)
from tests.kubevirt_source import guide_documents

pytestmark = pytest.mark.image

PROVISIONER = KubevirtProvisioner()
PYTHON = "/opt/jumpstarter/bin/python3"
CREDENTIALS = Credentials(
    "grpc.jumpstarter.example.com:443", "t0k3n", base64.b64encode(b"PEM").decode()
)
SERVER = "https://kubevirt.example.com:6443"
# A token kubeconfig, the kind the console's WebSocket accepts (docs/kubevirt.md).
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "target", "cluster": {"server": SERVER}}],
    "users": [{"name": "exporter", "user": {"token": "kubevirt-t0k3n"}}],
    "contexts": [{"name": "target", "context": {"cluster": "target", "user": "exporter"}}],
    "current-context": "target",
}

# Inside the image, by its own Python: argv[1] is the config file the Pod's command names.
LOAD = """
import json, sys
from pathlib import Path
from jumpstarter.common.utils import serve
from jumpstarter.config.exporter import ExporterConfigV1Alpha1, ExporterConfigV1Alpha1DriverInstance
from jumpstarter_driver_kubevirt.driver import _build_console_ws_url

config = ExporterConfigV1Alpha1.load_path(Path(sys.argv[1]))
# create_exporter's device_factory (jumpstarter/config/exporter.py)
root = ExporterConfigV1Alpha1DriverInstance(
    type="jumpstarter_driver_composite.driver.Composite",
    description=config.description,
    children=config.export,
).instantiate()
drivers = {}
for name, driver in root.children.items():
    kind = type(driver)
    fields = {k: getattr(driver, k) for k in ("kubeconfig", "namespace", "vm_name")}
    api = driver._get_client()  # lightkube's AsyncClient from the kubeconfig file
    drivers[name] = {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "config": fields,
        "client": kind.client(),
        "api": f"{type(api).__module__}.{type(api).__qualname__}",
    }
console = root.children["console"]
url, headers, _ = _build_console_ws_url(console.kubeconfig, console.namespace, console.vm_name)
with serve(root) as client:
    served = {name: type(child).__name__ for name, child in client.children.items()}
print(json.dumps({"drivers": drivers, "console": [url, sorted(headers)], "served": served}))
"""


@pytest.fixture(scope="module")
def exporter_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unpacked]:
    archive = build_kubevirt_exporter()
    with unpacked(archive, tmp_path_factory.mktemp("kubevirt-exporter") / "unpacked") as root:
        yield root


def _instance() -> tuple[dict[str, Any], dict[str, Any]]:
    """The guide's basic class with no image of its own (the provisioner's default, this
    image), its set: the instance's config (config.yaml) and Pod."""
    klass = next(d for d in guide_documents() if d["metadata"]["name"] == "kubevirt-basic")
    klass["spec"].pop("images")
    exporter_set = next(d for d in guide_documents() if d["kind"] == "ExporterSet")
    exporter_set["spec"]["virtualTargetClassName"] = klass["metadata"]["name"]
    exporter = render_exporter(exporter_set, "kubevirt-pool-")
    exporter["metadata"] |= {"name": "kubevirt-pool-7xk2p", "uid": "3f1c-exporter"}
    ctx = instance_context(exporter_set, klass, exporter, PROVISIONER.default_images, CREDENTIALS)
    secret = render_config_secret(ctx, PROVISIONER.drivers(ctx))
    config = yaml.safe_load(base64.b64decode(secret["data"][CONFIG_KEY]))
    return config, PROVISIONER.render_pod(ctx)


def _mounts(pod: dict[str, Any], folder: Path, config: dict[str, Any]) -> dict[str, Path]:
    """The Pod's two Secret volumes as host folders at its mount paths."""
    (container,) = pod["spec"]["containers"]
    paths = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert sorted(paths.values()) == sorted([CONFIG_DIR, CREDENTIALS_DIR])
    secrets = folder / "config", folder / "credentials"
    for path in secrets:
        path.mkdir()
    (secrets[0] / CONFIG_KEY).write_text(yaml.safe_dump(config))
    (secrets[1] / KUBECONFIG_KEY).write_text(yaml.safe_dump(KUBECONFIG))
    for path in secrets:
        shutil.chown(path, 65532, 65532)  # a Secret volume's files are readable to the user
        for item in path.iterdir():
            item.chmod(0o644)
    return {CONFIG_DIR: secrets[0], CREDENTIALS_DIR: secrets[1]}


def test_the_rendered_config_loads_into_the_drivers_the_rendering_names(
    exporter_image: Unpacked, tmp_path: Path
) -> None:
    config, pod = _instance()
    (container,) = pod["spec"]["containers"]
    assert container["name"] == EXPORTER_CONTAINER
    assert container["image"] == KUBEVIRT_EXPORTER_IMAGE  # the default: this image
    assert container["command"] == run_command()
    user = exporter_image.config["config"]["User"]
    assert user == f"{container['securityContext']['runAsUser']}:65532"
    result = exporter_image.run(
        [PYTHON, "-c", LOAD, container["command"][-1]],
        mounts=_mounts(pod, tmp_path, config),
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    rendered = {
        name: {"type": d["type"], "config": d["config"]} for name, d in config["export"].items()
    }
    assert [d["type"] for d in rendered.values()] == list(DRIVER_TYPES)
    assert {
        n: {"type": d["type"], "config": d["config"]} for n, d in loaded["drivers"].items()
    } == rendered
    vm = config["metadata"]["name"]
    for name, driver in loaded["drivers"].items():
        assert driver["config"] == {
            "kubeconfig": f"{CREDENTIALS_DIR}/{KUBECONFIG_KEY}",
            "namespace": "my-vms",
            "vm_name": vm,
        }
        assert driver["api"] == "lightkube.core.async_client.AsyncClient", name
    assert loaded["console"] == [
        f"wss://kubevirt.example.com:6443/apis/subresources.kubevirt.io/v1/namespaces/"
        f"my-vms/virtualmachineinstances/{vm}/console",
        ["Authorization"],
    ]
    assert loaded["served"] == {
        "power": "KubevirtPowerClient",
        "console": "KubevirtConsoleClient",
        "storage": "KubevirtStorageClient",
    }


def test_jmp_run_is_the_command_and_the_packages_agree(exporter_image: Unpacked) -> None:
    usage = exporter_image.run(["jmp", "run", "--help"])
    assert usage.returncode == 0, usage.stderr
    assert "--exporter-config" in usage.stdout
    # pip is not in the venv (the Dockerfile removes it): Debian's pip checks it.
    checked = exporter_image.run(
        ["/usr/bin/python3", "-m", "pip", "--python", PYTHON, "check"],
        entrypoint=[],
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No broken requirements found." in checked.stdout
    version = exporter_image.run(
        [
            PYTHON,
            "-c",
            "from importlib.metadata import version; print(version('jumpstarter-driver-kubevirt'))",
        ]
    )
    assert version.stdout.strip() == KUBEVIRT_DRIVER_VERSION, version.stderr


# Inside the image: what the console's WebSocket takes from a kubeconfig with a CA and a
# client certificate as data, and no token (argv[1]).
CONSOLE_TLS = """
import json, logging, sys
from jumpstarter_driver_kubevirt.driver import _build_console_ws_url

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
url, headers, context = _build_console_ws_url(sys.argv[1], "my-vms", "vm")
subjects = [dict(n[0] for n in c["subject"]).get("commonName") for c in context.get_ca_certs()]
print(json.dumps({"headers": sorted(headers), "subjects": subjects}))
"""


def test_the_console_reads_neither_the_ca_nor_the_client_certificate_of_a_kubeconfig(
    exporter_image: Unpacked, tmp_path: Path
) -> None:
    """#927 at cd305c7 looks them up as `certificate_authority_data` and
    `client_certificate_data`, which lightkube's models call `certificate_auth_data` and
    `client_cert_data` (docs/kubevirt.md, "The kubeconfig's permissions"): the WebSocket
    trusts only the image's CA bundle and authenticates only with a token. Should #927
    read them, this fails, and the page says otherwise."""
    import datetime as dt

    from certs.authority import new_ca

    ca = new_ca("kubevirt-test-ca", now=dt.datetime.now(dt.UTC))
    data = {
        "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
        "client-certificate-data": base64.b64encode(ca.cert_pem).decode(),
        "client-key-data": base64.b64encode(ca.key_pem).decode(),
    }
    kubeconfig = copy.deepcopy(KUBECONFIG)
    kubeconfig["clusters"][0]["cluster"] |= {
        "certificate-authority-data": data.pop("certificate-authority-data")
    }
    kubeconfig["users"][0]["user"] = data
    folder = tmp_path / "credentials"
    folder.mkdir()
    (folder / KUBECONFIG_KEY).write_text(yaml.safe_dump(kubeconfig))
    (folder / KUBECONFIG_KEY).chmod(0o644)
    result = exporter_image.run(
        [PYTHON, "-c", CONSOLE_TLS, f"{CREDENTIALS_DIR}/{KUBECONFIG_KEY}"],
        mounts={CREDENTIALS_DIR: folder},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    taken = json.loads(result.stdout.strip().splitlines()[-1])
    assert taken["headers"] == []
    assert taken["subjects"], "the image's CA bundle"
    assert "kubevirt-test-ca" not in taken["subjects"]
    assert "no auth credentials found in kubeconfig" in result.stderr
