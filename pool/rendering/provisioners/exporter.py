"""The container that runs `jmp run` in an instance Pod, as every provisioner here renders
it: the exporter image's unprivileged user, the command and readiness probe of
`pool.model.jumpstarter`, and the class's credentials Secret as its environment (what
Jumpstarter's exporter-set controller injects, `injectCredentialsSecretRef`). The QEMU
and KubeVirt provisioners add their volumes and sizes. Pure.
"""

from __future__ import annotations

from typing import Any

from pool.model.access import PODS
from pool.model.jumpstarter import EXPORTER_UID, readiness_command, run_command
from pool.rendering.render import Image, InstanceContext

__all__ = [
    "READY_PERIOD_S",
    "STARTUP_PERIOD_S",
    "STARTUP_WINDOW_S",
    "container",
    "env_from",
    "exporter_fields",
    "instance_pod",
    "unprivileged",
]

STARTUP_PERIOD_S = 2  # the checks while `jmp run` starts: how soon its Pod shows Ready
STARTUP_WINDOW_S = 300  # how long it may take to serve before the kubelet fails it
READY_PERIOD_S = 10  # the checks once it served


def unprivileged() -> dict[str, Any]:
    """The exporter image's containers: its unprivileged user, nothing gained, no
    capability, the runtime's default seccomp profile (Pod Security's `restricted`)."""
    return {
        "runAsUser": EXPORTER_UID,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container(name: str, image: Image, **fields: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"name": name, "image": image.image}
    if image.pull_policy:
        made["imagePullPolicy"] = image.pull_policy
    made.update(fields)
    return made


def env_from(ctx: InstanceContext) -> dict[str, Any]:
    """The class's credentials Secret as environment variables, where it names one."""
    if not ctx.credentials_secret:
        return {}
    return {"envFrom": [{"secretRef": {"name": ctx.credentials_secret}}]}


def exporter_fields() -> dict[str, Any]:
    """The exporter container's command and probes, the same in every layout."""
    check = {"exec": {"command": readiness_command()}}
    return {
        "command": run_command(),
        # Ready while `jmp run`'s serving child lives (a process check: 0.9.0 has no
        # endpoint); a failure's log tail becomes the termination message the pool's
        # Degraded condition quotes. Each check is an exec (a python3 reading /proc, and
        # the runtime's exec around it), so it runs often only while the container
        # starts: every 2 s until the first success, which the kubelet follows with a
        # readiness check at once, so the Pod is Ready as soon as before.
        "startupProbe": {
            **check,
            "periodSeconds": STARTUP_PERIOD_S,
            # Generous beside the period: a python3 start on a loaded node can take
            # seconds, and a slow check must not read as a dead exporter.
            "timeoutSeconds": 5,
            # A `jmp run` with no serving child STARTUP_WINDOW_S after its start is
            # failed by the kubelet (exit 137) and replaced under the backoff.
            "failureThreshold": STARTUP_WINDOW_S // STARTUP_PERIOD_S,
        },
        # Then every 10 s: a fifth of the execs of a warm instance's 2 s.
        "readinessProbe": {**check, "periodSeconds": READY_PERIOD_S, "timeoutSeconds": 5},
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def instance_pod(ctx: InstanceContext, spec: dict[str, Any]) -> dict[str, Any]:
    """The instance's Pod around `spec`: named after its Exporter, which owns it, with the
    template's labels and annotations and the class's node selector and tolerations."""
    if ctx.node_selector:
        spec["nodeSelector"] = dict(ctx.node_selector)
    if ctx.tolerations:
        spec["tolerations"] = list(ctx.tolerations)
    metadata: dict[str, Any] = {
        "name": ctx.exporter,
        "namespace": ctx.namespace,
        "labels": ctx.pod_labels(),
        "ownerReferences": [ctx.owner_reference()],
    }
    if ctx.annotations:
        metadata["annotations"] = dict(ctx.annotations)
    return {"apiVersion": PODS.api_version, "kind": PODS.kind, "metadata": metadata, "spec": spec}
