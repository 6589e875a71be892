"""What Jumpstarter defines and this reconciler hands to it, in one place (DESIGN §7).

Jumpstarter's exporter-set controller renders each pool instance as an Exporter, a
config Secret holding a Jumpstarter `ExporterConfig`, and a Pod whose main container
runs `jmp run --exporter-config <file>`. The names, paths and keys below are those
programs' contract, read from Jumpstarter's packages (`jumpstarter.config.exporter`,
`jumpstarter_cli.run`, `jumpstarter_driver_qemu.driver`, release `JUMPSTARTER_RELEASE`)
and its documentation; the tests check them against the real packages. No I/O.
"""

from __future__ import annotations

from api.jumpstarter import JUMPSTARTER_RELEASE

__all__ = [
    "CONFIG_DIR",
    "CONFIG_FILE",
    "CONFIG_KEY",
    "DEFAULT_CA_CONFIGMAP",
    "DEFAULT_CA_KEY",
    "EXEC_BINARY",
    "EXPORTER_CONFIG_API_VERSION",
    "EXPORTER_CONFIG_KIND",
    "EXPORTER_UID",
    "JUMPSTARTER_RELEASE",
    "LAUNCHER_SOCKET",
    "QEMU_DRIVER",
    "SHARED_DIR",
    "TCP_NETWORK_DRIVER",
    "TOKEN_KEY",
    "config_secret_name",
    "run_command",
]

# The ExporterConfig document (`jumpstarter.config.exporter.ExporterConfigV1Alpha1`).
EXPORTER_CONFIG_API_VERSION = "jumpstarter.dev/v1alpha1"
EXPORTER_CONFIG_KIND = "ExporterConfig"

# The credential Secret Jumpstarter's controller names in an Exporter's
# `status.credential`: the exporter's token under this key.
TOKEN_KEY = "token"

# The CA bundle a Jumpstarter install publishes in each namespace it serves, used when a
# class names no `caBundleConfigMapRef`.
DEFAULT_CA_CONFIGMAP = "jumpstarter-service-ca-cert"
DEFAULT_CA_KEY = "ca.crt"

# Per instance: the config Secret, its key, and where the Pod mounts it
# (`ExporterConfigV1Alpha1.SYSTEM_CONFIG_PATH`).
CONFIG_KEY = "config.yaml"
CONFIG_DIR = "/etc/jumpstarter/exporters"
CONFIG_FILE = f"{CONFIG_DIR}/{CONFIG_KEY}"

# The exporter image's unprivileged user, and the exec helper it ships for the runtime.
EXPORTER_UID = 65532
EXEC_BINARY = "/jumpstarter/bin/jumpstarter-exec"

# The volume the exporter and the runtime sidecar share, and the launcher socket on it.
SHARED_DIR = "/shared"
LAUNCHER_SOCKET = f"{SHARED_DIR}/launcher.sock"

# Driver classes the QEMU provisioner recognises in a template.
QEMU_DRIVER = "jumpstarter_driver_qemu.driver.Qemu"
TCP_NETWORK_DRIVER = "jumpstarter_driver_network.driver.TcpNetwork"


def config_secret_name(exporter: str) -> str:
    return f"exporter-config-{exporter}"


def run_command() -> list[str]:
    """The exporter container's command: `jmp run` with the mounted config."""
    return ["jmp", "run", "--exporter-config", CONFIG_FILE]
