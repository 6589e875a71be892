"""A pool instance is what Jumpstarter's `jmp run` starts from.

Through kube-apiserver: Jumpstarter's released 0.9.0 controller serves the namespace and
issues the credential (its token Secret, `status.credential`, `status.endpoint`; the CA
ConfigMap is its install's), the reconciler writes the config Secret and the Pod (which
mounts no ServiceAccount token), and the test runs the Pod's exporter command, `jmp run
--exporter-config FILE` from the jumpstarter 0.9.0 packages, as a local process on the
config.yaml read back from the apiserver. It registers with that controller over TLS with
the CA the config carries. Then the token is rotated as that controller rotates one (its
Secret deleted, a new one issued): the config Secret follows and the Pod is left alone.
The exporter container's readiness probe, run on that process, says ready while it serves
and not ready once it stopped.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import running_reconciler
from pool.model.jumpstarter import CONFIG_KEY, config_secret_name, run_command
from tests.e2e.objects import (
    apply,
    credential,
    exporter_set,
    get_json,
    rotate_credential,
    set_status,
    virtual_target_class,
    wait_for,
)
from tests.exporters import DRIVER_NAMES, DRIVERS, reported_drivers


def _config_text(plane: ControlPlane, ns: str, exporter: str) -> str:
    secret = get_json(plane, "secret", config_secret_name(exporter), "-n", ns)
    return base64.b64decode(secret["data"][CONFIG_KEY]).decode()


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def _exporter_status(plane: ControlPlane, ns: str, exporter: str) -> dict[str, Any]:
    status: dict[str, Any] = get_json(plane, "exporter", exporter, "-n", ns).get("status") or {}
    return status


def test_jmp_run_registers_from_the_rendered_config_and_a_rotated_token_follows(
    control_plane: ControlPlane, jumpstarter: Jumpstarter, tmp_path: Path
) -> None:
    ns, plane = jumpstarter.namespace, control_plane
    endpoint, ca_pem = jumpstarter.endpoint, jumpstarter.ca_pem.encode()
    apply(plane, virtual_target_class("qemu", ns))
    pool = exporter_set("pool", ns, class_name="qemu", with_template=True, minReplicas=1)
    pool["spec"]["template"]["spec"] = {"drivers": DRIVERS}
    apply(plane, pool)
    jmp: subprocess.Popen[bytes] | None = None
    probe: list[str] = []
    with running_reconciler(
        plane, tmp_path, extra=["--namespace", ns, "--no-leader-election"]
    ) as reconciler:
        try:
            (found,) = wait_for("the Pod", lambda: get_json(plane, "pods", "-n", ns)["items"])
            exporter = found["metadata"]["name"]
            config = yaml.safe_load(_config_text(plane, ns, exporter))
            assert config["endpoint"] == endpoint
            assert base64.b64decode(config["tls"]["ca"]) == ca_pem
            pod = get_json(plane, "pod", exporter, "-n", ns)
            (container,) = pod["spec"]["containers"]
            command = container["command"]
            assert command == run_command()
            # The exporter never calls the Kubernetes API: no ServiceAccount token in the
            # Pod, and `jmp run` below registers without one.
            assert pod["spec"]["automountServiceAccountToken"] is False
            assert [v for v in pod["spec"]["volumes"] if "projected" in v] == []
            mounts = [m["mountPath"] for c in _containers(pod) for m in c["volumeMounts"]]
            assert not [m for m in mounts if m.startswith("/var/run/secrets/kubernetes.io")]

            # The Pod's command, on the config read back from the apiserver.
            config_file = tmp_path / "config.yaml"
            config_file.write_text(_config_text(plane, ns, exporter))
            jmp_bin = Path(sys.executable).parent / command[0]
            jmp = subprocess.Popen(
                [str(jmp_bin), *command[1:-1], str(config_file)],
                stdout=(tmp_path / "jmp.log").open("wb"),
                stderr=subprocess.STDOUT,
                env={**os.environ, "HOME": str(tmp_path)},
                start_new_session=True,
            )
            started = time.monotonic()
            devices = wait_for(
                "jmp run to register",
                lambda: _exporter_status(plane, ns, exporter).get("devices"),
                timeout=90,
            )
            print(f"\njmp run registered {time.monotonic() - started:.1f}s after it started")
            # The token the controller issued, in the config it registered with.
            _, token = credential(plane, ns, exporter)
            assert config["token"] == token
            assert reported_drivers(devices) == DRIVER_NAMES

            # The exporter container's readiness probe, on this jmp run: ready while it
            # serves, not ready once it has stopped.
            probe = container["readinessProbe"]["exec"]["command"]
            assert probe[-len(command) :] == command
            probe = [*probe[: -len(command)], *command[:-1], str(config_file)]
            assert subprocess.run(probe, check=False).returncode == 0

            # Rotation: the credential Secret deleted, the controller issues a new one (a
            # token signed a second later); the new token reaches the config Secret.
            before = get_json(plane, "pod", exporter, "-n", ns)["metadata"]
            new_token = rotate_credential(plane, ns, exporter)
            rotated_at = time.monotonic()
            assert new_token != token
            wait_for(
                "the config Secret to carry the new token",
                lambda: yaml.safe_load(_config_text(plane, ns, exporter))["token"] == new_token,
            )
            print(f"config Secret followed the rotation in {time.monotonic() - rotated_at:.2f}s")
            after = get_json(plane, "pod", exporter, "-n", ns)["metadata"]
            assert (after["uid"], after["resourceVersion"]) == (
                before["uid"],
                before["resourceVersion"],
            )

            # Jumpstarter's controller marked it Registered and Online; the pool counts it
            # ready.
            def conditions() -> dict[str, str]:
                status = get_json(plane, "exporter", exporter, "-n", ns).get("status") or {}
                return {c["type"]: c["status"] for c in status.get("conditions") or []}

            wait_for(
                "Registered and Online",
                lambda: conditions().get("Registered") == conditions().get("Online") == "True",
            )
            wait_for(
                "readyReplicas 1",
                lambda: set_status(plane, ns).get("readyReplicas") == 1,
            )

            reconciler.check_alive()
        finally:
            if jmp is not None:
                os.killpg(jmp.pid, signal.SIGTERM)
                try:
                    jmp.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(jmp.pid, signal.SIGKILL)
                    jmp.wait()
    assert subprocess.run(probe, check=False).returncode == 1  # jmp run has stopped
