"""What the fault tests share: identities told apart in the audit log, bounded polls that
tolerate an apiserver that is down, reviews sent to the webhook as kube-apiserver would,
and metrics read from the reconciler."""

from __future__ import annotations

import json
import secrets
import ssl
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.stack import WebhookServer
from tests.e2e.objects import get_json


def identity(plane: ControlPlane, namespace: str, name: str, folder: Path) -> Path:
    """A kubeconfig for a ServiceAccount of its own with cluster-admin: writes in the audit
    log are then told apart by who made them."""
    plane.kubectl("create", "serviceaccount", name, "-n", namespace)
    plane.kubectl(
        "create",
        "clusterrolebinding",
        f"{namespace}-{name}",
        "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:{name}",
    )
    return plane.service_account_kubeconfig(namespace, name, folder / f"{name}.kubeconfig")


def names(plane: ControlPlane, resource: str, namespace: str, *select: str) -> list[str]:
    items = get_json(plane, resource, "-n", namespace, *select)["items"]
    return sorted(
        i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")
    )


def until(what: str, probe: Callable[[], Any], timeout: float) -> float:
    """Poll `probe` until it holds (errors while the control plane is down, and the probe's
    own failed asserts, count as not yet); the seconds it took. AssertionError after
    `timeout`, from the probe's last failed assert when it made one, so its message shows."""
    started = time.monotonic()
    last: Any = None
    refused: AssertionError | None = None
    while True:
        try:
            last = probe()
        except AssertionError as exc:  # the probe's own check: not yet, and kept to show
            last = refused = exc
        except Exception as exc:  # the apiserver is still coming back
            last = exc
        if last is True or (last and not isinstance(last, Exception)):
            return time.monotonic() - started
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            break
        time.sleep(min(0.2, left))
    if refused is not None:
        raise AssertionError(f"{what}: not within {timeout:.0f}s: {refused}") from refused
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def review(
    server: WebhookServer, obj: dict[str, Any], *, timeout: str = "10s"
) -> tuple[dict[str, Any], float]:
    """Send a CREATE review of `obj` to the webhook's validating path for its kind, as
    kube-apiserver would (with `?timeout=`); the response and how long it took."""
    group, version = obj["apiVersion"].split("/")
    kind = obj["kind"]
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": secrets.token_hex(8),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "operation": "CREATE",
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }
    path = f"/validate-{group.replace('.', '-')}-{version}-{kind.lower()}"
    request = urllib.request.Request(
        f"{server.url}{path}?timeout={timeout}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    context = ssl.create_default_context(cadata=server.certificates.ca_pem.decode())
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        response: dict[str, Any] = json.loads(answer.read())["response"]
    return response, time.monotonic() - started


def metric(url: str, token: str, name: str) -> float:
    """The sum of a metric's samples on a /metrics endpoint (self-signed TLS)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )
