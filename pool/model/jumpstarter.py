"""What Jumpstarter defines and this reconciler hands to it, in one place (docs/design.md §7).

Jumpstarter's exporter-set controller renders each pool instance as an Exporter, a
config Secret holding a Jumpstarter `ExporterConfig`, and a Pod whose main container
runs `jmp run --exporter-config <file>`. The names, paths and keys below are those
programs' contract, read from Jumpstarter's packages (`jumpstarter.config.exporter`,
`jumpstarter_cli.run`, `jumpstarter_driver_qemu.driver`, release `JUMPSTARTER_RELEASE`)
and its documentation; the tests check them against the real packages. No I/O.
"""

from __future__ import annotations

from api.jumpstarter import JUMPSTARTER_RELEASE, QEMU_DRIVER

__all__ = [
    "CONFIG_DIR",
    "CONFIG_FILE",
    "CONFIG_KEY",
    "DEFAULT_CA_CONFIGMAP",
    "DEFAULT_CA_KEY",
    "EXEC_BINARY",
    "EXPORTER_CONFIG_API_VERSION",
    "EXPORTER_CONFIG_KIND",
    "EXPORTER_CONTAINER",
    "EXPORTER_UID",
    "JUMPSTARTER_RELEASE",
    "LAUNCHER_SOCKET",
    "QEMU_DRIVER",
    "READINESS_SCRIPT",
    "SHARED_DIR",
    "TCP_NETWORK_DRIVER",
    "TOKEN_KEY",
    "config_secret_name",
    "readiness_command",
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

# The instance Pod's container that runs `jmp run`.
EXPORTER_CONTAINER = "exporter"

# The exporter image's unprivileged user, and the exec helper it ships for the runtime.
EXPORTER_UID = 65532
EXEC_BINARY = "/jumpstarter/bin/jumpstarter-exec"

# The volume the exporter and the runtime sidecar share, and the launcher socket on it.
SHARED_DIR = "/shared"
LAUNCHER_SOCKET = f"{SHARED_DIR}/launcher.sock"

# Driver classes the QEMU provisioner recognises in a template (QEMU_DRIVER: api's).
TCP_NETWORK_DRIVER = "jumpstarter_driver_network.driver.TcpNetwork"


def config_secret_name(exporter: str) -> str:
    return f"exporter-config-{exporter}"


def run_command() -> list[str]:
    """The exporter container's command: `jmp run` with the mounted config."""
    return ["jmp", "run", "--exporter-config", CONFIG_FILE]


# The exporter container's readiness: a process check, the only signal 0.9.0 offers inside
# the Pod (it serves no health endpoint and writes no status file; its sockets are
# temporary). `jmp run` (`jumpstarter_cli.run._serve_with_exc_handling`) forks the process
# that registers and serves, waits for it, and forks again after a quick failure; the
# forked child keeps its parent's command line. Ready: a live (not zombie) process whose
# parent runs the same `jmp run` command line. Run by the exporter image's Python, with the
# container's command as arguments; only the standard library and /proc are used.
READINESS_SCRIPT = """
import os, sys
want = sys.argv[1:]
def read(pid, part):
    try:
        with open(f"/proc/{pid}/{part}", "rb") as f:
            return f.read()
    except OSError:
        return b""
def is_jmp_run(cmdline):
    args = [a.decode(errors="replace") for a in cmdline.split(b"\\0")[:-1]]
    tail = want[1:]
    return (
        len(args) >= len(want)
        and args[len(args) - len(tail):] == tail
        and any(os.path.basename(a) == want[0] for a in args[: len(args) - len(tail)])
    )
for pid in filter(str.isdigit, os.listdir("/proc")):
    fields = read(pid, "stat").rsplit(b")", 1)[-1].split()
    if len(fields) < 2 or fields[0] == b"Z":
        continue
    cmdline = read(pid, "cmdline")
    if is_jmp_run(cmdline) and read(fields[1].decode(), "cmdline") == cmdline:
        sys.exit(0)
sys.exit(1)
"""


def readiness_command(command: list[str] | None = None) -> list[str]:
    """The exporter container's readiness probe for `command` (default `run_command()`)."""
    # -I -S: the check needs only os and sys; skipping site and the environment's
    # PYTHON* settings cuts a third of the interpreter's start, paid at every probe.
    return ["python3", "-I", "-S", "-c", READINESS_SCRIPT, *(command or run_command())]
