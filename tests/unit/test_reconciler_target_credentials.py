"""A KubeVirt pool whose class's credentials Secret is missing, or has no `kubeconfig` key:
the set's `Degraded` condition (`TargetFailed`) names the Secret as namespace/name and the
key, and clears at the next pass once the Secret holds a kubeconfig, in the same process.

The controller runs on its real caches over the recording client of
`test_reconciler_step_failures` (which holds the Secrets a live read finds); the target
cluster is a loopback HTTP server standing for its apiserver, reached with the kubeconfig
the Secret holds."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from pool.model.access import CLASSES, EXPORTERSETS, SECRETS
from pool.model.reasons import TARGET_FAILED
from pool.model.status import condition_of
from pool.rendering.provisioners import provisioner
from reconciler.runtime.controller import Controller
from reconciler.runtime.failures import StepFailed
from tests.unit.test_reconciler_step_failures import (
    INSTANCE,
    NOW,
    NS,
    SET,
    UID,
    RecordingKube,
    _seed_instance,
    _seen,
    _waiting_status,
    _warnings,
)

Obj = dict[str, Any]
CREDENTIALS = "kubevirt-credentials"
THERE = "vms"  # the target namespace


class _Target(BaseHTTPRequestHandler):
    """The target cluster's apiserver: lists are empty, a create is stored as sent with a
    uid. The paths asked for are kept in `server.paths`."""

    def _answer(self, body: Obj) -> None:
        data = json.dumps(body).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.paths.append(f"GET {self.path}")  # type: ignore[attr-defined]
        self._answer({"items": [], "metadata": {"resourceVersion": "1"}})

    def do_POST(self) -> None:
        self.server.paths.append(f"POST {self.path}")  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = body["metadata"]["name"]
        body["metadata"].update(uid=f"uid-{name}", resourceVersion="2")
        self._answer(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def target() -> Iterator[tuple[str, list[str]]]:
    """The target's apiserver URL and the requests it got."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    server.paths = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server.paths  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def _kubeconfig(server: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "target", "cluster": {"server": server}}],
            "users": [{"name": "kubevirt", "user": {"token": "t"}}],
            "contexts": [{"name": "target", "context": {"cluster": "target", "user": "kubevirt"}}],
            "current-context": "target",
        }
    )


def _credentials(version: str, **data: str) -> Obj:
    """The class's credentials Secret as a live read finds it."""
    meta = {"name": CREDENTIALS, "namespace": NS, "resourceVersion": version}
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": encoded}


class _Kube(RecordingKube):
    may_write = None  # no leader election: the target's client writes as this one would


def _lab() -> tuple[Controller, RecordingKube]:
    """A KubeVirt pool of one instance whose credentials came and which has no Pod yet."""
    kube = _Kube()
    kubevirt = provisioner("kubevirt.jumpstarter.dev")
    controller = Controller(kube, kubevirt, clock=lambda: NOW)  # type: ignore[arg-type]
    informers = controller.informers
    informers[CLASSES].apply(
        "ADDED",
        {
            "metadata": {"name": "kubevirt", "namespace": NS},
            "spec": {
                "provisioner": "kubevirt.jumpstarter.dev",
                "credentialsSecretRef": {"name": CREDENTIALS},
                "parameters": {"namespace": THERE, "image": "quay.io/containerdisks/fedora:41"},
            },
        },
    )
    informers[EXPORTERSETS].apply(
        "ADDED",
        {
            "metadata": {
                "name": SET,
                "namespace": NS,
                "uid": UID,
                "generation": 1,
                "resourceVersion": "1",
                "creationTimestamp": "2026-01-01T10:00:00Z",
                # #927's finalizer, already there: the pass writes no set
                "finalizers": ["exporterset.jumpstarter.dev/remote-cleanup"],
            },
            "spec": {
                "virtualTargetClassName": "kubevirt",
                "selector": {"matchLabels": {"board": SET}},
                "template": {"metadata": {"labels": {"board": SET}}},
                "minAvailableReplicas": 1,
                "maxReplicas": 1,
            },
            "status": _waiting_status(),
        },
    )
    _seed_instance(informers, kube)
    return controller, kube


def _degraded(kube: RecordingKube) -> Obj:
    found: Obj = condition_of(kube.statuses[-1], "Degraded")
    return found


def _fails(controller: Controller) -> str:
    """One pass, which fails at the instance's Pod on its target: the failure's message."""
    with pytest.raises(StepFailed) as failed:
        controller.sync((NS, SET))
    assert failed.value.failure.reason == TARGET_FAILED
    return failed.value.failure.message


def test_a_missing_then_keyless_secret_is_named_with_its_key_and_clears_once_fixed(
    target: tuple[str, list[str]],
) -> None:
    server, requests = target
    controller, kube = _lab()

    # No Secret: named, with the key it must hold; nothing made there or here.
    missing = (
        f'credentials Secret {NS}/{CREDENTIALS} not found (its key "kubeconfig" must hold '
        "the target cluster's kubeconfig)"
    )
    assert _fails(controller) == missing
    degraded = _degraded(kube)
    assert (degraded["status"], degraded["reason"]) == ("True", TARGET_FAILED)
    assert degraded["message"] == f"create pod {INSTANCE}: {missing}"
    assert _warnings(kube) == [
        ("ExporterSetDegraded", f"Degraded True (TargetFailed): {degraded['message']}")
    ]
    assert not [w for w in kube.writes if w[1] == "pods"]
    _seen(controller, kube.statuses[-1], "2")

    # The Secret made without the key: the next pass says so, its own Warning.
    kube.stored[SECRETS.plural, CREDENTIALS] = _credentials("10", config=_kubeconfig(server))
    keyless = (
        f'credentials Secret {NS}/{CREDENTIALS} has no key "kubeconfig" (the target '
        "cluster's kubeconfig)"
    )
    assert _fails(controller) == keyless
    assert _degraded(kube)["message"] == f"create pod {INSTANCE}: {keyless}"
    assert _warnings(kube)[-1] == (TARGET_FAILED, f"create pod {INSTANCE}: {keyless}")
    assert not [w for w in kube.writes if w[1] == "pods"] and requests == []
    _seen(controller, kube.statuses[-1], "3")

    # The key given: the same controller reaches the target, makes the VM there, then the
    # Pod here, and the condition clears.
    kube.stored[SECRETS.plural, CREDENTIALS] = _credentials("11", kubeconfig=_kubeconfig(server))
    controller.sync((NS, SET))
    assert f"POST /apis/kubevirt.io/v1/namespaces/{THERE}/virtualmachines" in requests
    assert ("create", "pods", INSTANCE) in kube.writes
    degraded = _degraded(kube)
    assert (degraded["status"], degraded["reason"]) == ("False", "AllReplicasHealthy")
    assert "ExporterSetRecovered" in [e["reason"] for e in kube.events]


def test_an_empty_kubeconfig_key_is_named_too() -> None:
    controller, kube = _lab()
    kube.stored[SECRETS.plural, CREDENTIALS] = _credentials("10", kubeconfig="")
    assert _fails(controller) == (
        f'credentials Secret {NS}/{CREDENTIALS}: key "kubeconfig" is empty (the target '
        "cluster's kubeconfig)"
    )
