"""Building, applying and waiting for objects in the end-to-end tests."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

from harness.controlplane import ControlPlane
from harness.jumpstarter_crds import release_crd
from harness.kubeget import find_json as find_json  # the tests' reads, re-exported
from harness.kubeget import get_json as get_json
from pool.model.jumpstarter import TOKEN_KEY
from pool.model.keys import BACKOFF_STEP, STANDBY_LABEL, SURPLUS_SINCE
from reconciler.runtime.memory import lease_name

GROUP_VERSION = "virtualtarget.jumpstarter.dev/v1alpha1"
NOW = "2026-01-01T00:00:00Z"

# Jumpstarter's Lease CRD, the release's (its operator installs it).
LEASES_CRD_FILE = "jumpstarter.dev_leases.yaml"
# The Client a Lease written here names (`spec.clientRef`, required by the release's CRD).
LEASE_CLIENT = "tester"


def install_lease_crd(plane: ControlPlane) -> None:
    """Jumpstarter's release Lease CRD alone, as in a cluster where Jumpstarter serves
    Leases (read from the release's source tarball: `harness.jumpstarter_crds`)."""
    crd = release_crd(LEASES_CRD_FILE)
    plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crd))
    plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}"
    )


def lease(
    name: str, namespace: str, labels: dict[str, str], begin: str | None = None
) -> dict[str, Any]:
    """A pending Jumpstarter Lease asking for an exporter with `labels`, booked for
    `begin` when given (`spec.beginTime`, as Jumpstarter's client asks for a later begin),
    for the Client `LEASE_CLIENT`."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": dict(labels)},
        "clientRef": {"name": LEASE_CLIENT},
    }
    if begin is not None:
        spec["beginTime"] = begin
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def virtual_target_class(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "VirtualTargetClass",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"provisioner": "qemu.jumpstarter.dev", **spec},
    }


def exporter_set(
    name: str,
    namespace: str,
    *,
    class_name: str,
    labels: dict[str, str] | None = None,
    with_template: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A set selecting `labels` (default `pool: NAME`); its template carries them only
    `with_template`, otherwise the webhook is expected to fill them in."""
    labels = labels or {"pool": name}
    body: dict[str, Any] = {
        "virtualTargetClassName": class_name,
        "selector": {"matchLabels": labels},
    }
    if with_template:
        body["template"] = {"metadata": {"labels": dict(labels)}}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ExporterSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**body, **spec},
    }


def apply(
    plane: ControlPlane, *objects: dict[str, Any], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`kubectl apply` of the objects as one List."""
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    return plane.kubectl("apply", "-f", "-", input=json.dumps(items), check=check)


def pool_memory(plane: ControlPlane, namespace: str, set_name: str) -> dict[str, str] | None:
    """The annotations a namespaced install's memory Lease `surplus-since.<set>` holds,
    None when there is no such Lease."""
    found = plane.kubectl(
        "get",
        "leases.coordination.k8s.io",
        lease_name(set_name),
        "-n",
        namespace,
        "-o",
        "json",
        check=False,
    )
    if found.returncode != 0:
        return None
    return dict(json.loads(found.stdout)["metadata"].get("annotations") or {})


def surplus_memory(plane: ControlPlane, namespace: str, set_name: str) -> str | None:
    """What a namespaced install remembers of a set's surplus: the moment its Lease
    `surplus-since.<set>` holds, "" when it holds none, None when there is no such Lease."""
    annotations = pool_memory(plane, namespace, set_name)
    return None if annotations is None else str(annotations.get(SURPLUS_SINCE) or "")


def set_status(plane: ControlPlane, namespace: str, name: str = "pool") -> dict[str, Any]:
    """An ExporterSet's status, or {} before the reconciler's first status write."""
    return get_json(plane, "exporterset", name, "-n", namespace).get("status") or {}


def wait_for(
    what: str,
    probe: Callable[[], Any],
    timeout: float = 60,
    *,
    every: float = 0.3,
    seen: Callable[[], str] | None = None,
) -> Any:
    """Poll every `every` seconds until `probe` returns something true, and return it
    (bounded, not a timing assertion: the timeout only ends a test that would otherwise
    hang). At the timeout the message gives the probe's last answer and, for a probe that
    answers only None, what `seen` says was there."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    there = f"; last seen: {seen()}" if seen else ""
    raise AssertionError(f"timed out waiting for {what} (last: {last!r}){there}")


def try_apply(plane: ControlPlane, *objects: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`apply` that returns a refusal instead of raising, for tests about refusals."""
    return apply(plane, *objects, check=False)


def patch_spec(plane: ControlPlane, kind: str, name: str, namespace: str, **spec: Any) -> None:
    """A merge patch of `spec` fields, as `kubectl patch --type=merge` sends it."""
    body = json.dumps({"spec": spec})
    plane.kubectl("patch", kind, name, "-n", namespace, "--type=merge", "-p", body)


def backoff_steps(events: list[dict[str, Any]]) -> list[int]:
    """The steps the pool's BackOff Events name ("failure N in a row"), in order; Events
    as core v1 (`message`) or events.k8s.io/v1 (`note`) serve them."""
    notes = (str(e.get("note") or e.get("message") or "") for e in events
             if e.get("reason") == "BackOff")  # fmt: skip
    return sorted(int(n) for note in notes for n in re.findall(r"failure (\d+) in a row", note))


def instance_step(exporter: dict[str, Any]) -> int | None:
    """The backoff step an Exporter started at (0: before any failure); None for a
    standby, which counts once promoted."""
    meta = exporter.get("metadata") or {}
    if STANDBY_LABEL in (meta.get("labels") or {}):
        return None
    return int((meta.get("annotations") or {}).get(BACKOFF_STEP) or 0)


def one_probe_per_step(slots: int, starts: dict[int, int]) -> dict[int, int]:
    """What a pool of `slots` whose every Pod fails starts, however long it is watched
    (`starts`: how many instances started at each step): its slots at step 0, then one
    probe per failure in a row, each step once, none skipped."""
    return {0: slots, **dict.fromkeys(range(1, len(starts)), 1)}


# -- what Jumpstarter's controller writes -----------------------------------------------


def assigned_exporter(plane: ControlPlane, namespace: str, lease: str) -> str:
    """The Exporter Jumpstarter's controller gave the Lease `lease` ('' before it did, or
    when the Lease is gone)."""
    found = plane.kubectl(
        "get", "leases.jumpstarter.dev", lease, "-n", namespace, "-o", "json", check=False
    )
    if found.returncode != 0:
        return ""
    status = json.loads(found.stdout).get("status") or {}
    return str((status.get("exporterRef") or {}).get("name") or "")


def credential(plane: ControlPlane, namespace: str, exporter: str) -> tuple[str, str]:
    """The credential Secret Jumpstarter's controller issued the Exporter (the one its
    `status.credential` names): its uid and token; ("", "") before it did."""
    status = (find_json(plane, "exporter", exporter, "-n", namespace) or {}).get("status") or {}
    name = (status.get("credential") or {}).get("name")
    body = find_json(plane, "secret", str(name), "-n", namespace) if name else None
    if body is None:
        return "", ""
    return body["metadata"]["uid"], base64.b64decode(body["data"][TOKEN_KEY]).decode()


def rotate_credential(plane: ControlPlane, namespace: str, exporter: str) -> str:
    """Rotate the Exporter's credential as Jumpstarter's controller does (its Secret deleted,
    a new one issued); the new token, once issued."""
    uid, _ = credential(plane, namespace, exporter)
    time.sleep(1.0)  # a token's issue time is in whole seconds: the next one differs
    name = get_json(plane, "exporter", exporter, "-n", namespace)["status"]["credential"]["name"]
    plane.kubectl("delete", "secret", name, "-n", namespace)
    _, token = wait_for(
        f"a new credential for {exporter}",
        lambda: (found := credential(plane, namespace, exporter))[0] not in ("", uid) and found,
    )
    return str(token)


def play_registered(plane: ControlPlane, namespace: str, exporter: str) -> None:
    """Registered and Online written by hand, as Jumpstarter's controller writes them: only
    where no Jumpstarter controller can run (it exits without its Lease CRD), which would
    overwrite it."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": now}
        for kind in ("Registered", "Online")
    ]
    body = {"status": {"conditions": conditions, "exporterStatus": "Available"}}
    plane.kubectl("patch", "exporter", exporter, "-n", namespace, "--subresource=status",
                  "--type=merge", "-p", json.dumps(body))  # fmt: skip
