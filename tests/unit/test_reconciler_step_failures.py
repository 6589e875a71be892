"""A step that fails reaches the set's status, and a pass logs only what it carried out.

The controller runs on its real caches over a recording client that refuses the writes a
test asks it to, with the apiserver's own words."""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from pool.model.access import (
    CLASSES,
    EVENTS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    PODS,
    SECRETS,
    Resource,
)
from pool.model.keys import SET_LABEL
from pool.model.reasons import RENDER_FAILED, WRITE_REJECTED
from pool.model.status import condition_of
from pool.rendering.provisioners import provisioner
from reconciler.runtime.controller import Controller, Lane
from reconciler.runtime.failures import StepFailed, classify, trimmed
from reconciler.runtime.kube import ApiError

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
NS, SET, UID = "lab", "pool", "set-uid"
INSTANCE = "pool-a1b2c"
TOO_LONG = ApiError(
    422,
    "Invalid",
    f'Secret "exporter-config-{INSTANCE}" is invalid: data: Too long: may not be more than '
    "1048576 bytes",
)

Obj = dict[str, Any]


class RecordingKube:
    """Records every write; refuses those of a resource named in `refuse`."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, str]] = []  # (verb, resource, name)
        self.statuses: list[Obj] = []
        self.events: list[Obj] = []
        self.refuse: dict[str, Exception] = {}
        self.serial = 0
        self.stored: dict[tuple[str, str], Obj] = {}  # (resource, name) -> what a GET finds

    def _write(self, verb: str, resource: Resource, name: str) -> None:
        refused = self.refuse.get(resource.plural)
        if refused is not None:
            raise refused
        self.writes.append((verb, resource.plural, name))

    def create(self, resource: Resource, ns: str, body: Obj) -> Obj:
        meta = dict(body["metadata"])
        if "name" not in meta:
            self.serial += 1
            meta["name"] = f"{meta['generateName']}{self.serial:05d}"
        self._write("create", resource, meta["name"])
        if resource is EVENTS:
            self.events.append(body)
        return {**body, "metadata": {**meta, "uid": f"uid-{meta['name']}", "resourceVersion": "9"}}

    def patch(self, resource: Resource, ns: str, name: str, body: Obj, sub: str = "") -> Obj:
        self._write("patch", resource, f"{name}/{sub}" if sub else name)
        if sub == "status":
            self.statuses.append(body["status"])
        return body

    def update(self, resource: Resource, ns: str, name: str, body: Obj) -> Obj:
        self._write("update", resource, name)
        return body

    def delete(self, resource: Resource, ns: str, name: str, uid: str | None = None) -> bool:
        self._write("delete", resource, name)
        return True

    def get(self, resource: Resource, ns: str, name: str) -> Obj | None:
        return self.stored.get((resource.plural, name))  # read by name, as the apiserver holds it

    def list(self, resource: Resource, ns: str | None = None, selector: str | None = None) -> Any:
        return [], "1"


def _exporter(name: str, issued: bool = True, lease: str = "") -> Obj:
    status: Obj = {}
    if issued:
        status = {"credential": {"name": f"{name}-token"}, "endpoint": "grpc.example:443"}
    if lease:
        status["leaseRef"] = {"name": lease}
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Exporter",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": "3",
            "creationTimestamp": "2026-01-01T11:00:00Z",
            "labels": {"board": SET, SET_LABEL: SET},
            "ownerReferences": [
                {"kind": "ExporterSet", "name": SET, "uid": UID, "controller": True}
            ],
        },
        "spec": {"enabled": True},
        "status": status,
    }


def _waiting_status() -> Obj:
    """What a pass wrote while the instance waited for its credentials."""
    return {
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "reason": "WaitingForCredentials",
                "message": f"1 instance(s) wait ...; {INSTANCE}: no status.credential yet",
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            },
            {
                "type": "Degraded",
                "status": "False",
                "reason": "AllReplicasHealthy",
                "message": "",
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            },
        ]
    }


@pytest.fixture
def lab() -> tuple[Controller, RecordingKube]:
    return make_lab()


def make_lab() -> tuple[Controller, RecordingKube]:
    """A pool of one instance whose credentials came and which has no Pod yet."""
    kube = RecordingKube()
    controller = Controller(kube, provisioner("qemu.jumpstarter.dev"), clock=lambda: NOW)  # type: ignore[arg-type]
    informers = controller.informers
    informers[CLASSES].apply(
        "ADDED",
        {
            "metadata": {"name": "qemu", "namespace": NS},
            "spec": {"provisioner": "qemu.jumpstarter.dev"},
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
            },
            "spec": {
                "virtualTargetClassName": "qemu",
                "selector": {"matchLabels": {"board": SET}},
                "template": {"metadata": {"labels": {"board": SET}}},
                "minAvailableReplicas": 1,
                "maxReplicas": 3,
            },
            "status": _waiting_status(),
        },
    )
    _seed_instance(informers, kube)
    return controller, kube


def _seed_instance(informers: Any, kube: RecordingKube) -> None:
    """The set's one instance in the caches: its Exporter and its token Secret."""
    informers[EXPORTERS].apply("ADDED", _exporter(INSTANCE))
    token = {
        "metadata": {"name": f"{INSTANCE}-token", "namespace": NS},
        "data": {"token": base64.b64encode(b"t" * 40).decode()},
    }
    kube.stored[SECRETS.plural, f"{INSTANCE}-token"] = token
    informers[SECRETS].apply("ADDED", token)


def _seen(controller: Controller, status: Obj, version: str) -> None:
    """The set's status reaches the cache, as a watch would bring it."""
    sets = controller.informers[EXPORTERSETS]
    current = sets.get(NS, SET)
    assert current is not None
    meta = {**current["metadata"], "resourceVersion": version}
    sets.apply("MODIFIED", {**current, "metadata": meta, "status": status})


def _warnings(kube: RecordingKube) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in kube.events if e["type"] == "Warning"]


def test_a_refused_write_reaches_the_status_once_per_distinct_failure(
    lab: tuple[Controller, RecordingKube],
) -> None:
    controller, kube = lab
    kube.refuse[SECRETS.plural] = TOO_LONG
    with pytest.raises(StepFailed) as failed:
        controller.sync((NS, SET))
    assert failed.value.failure.reason == WRITE_REJECTED
    [status] = kube.statuses
    degraded = condition_of(status, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == WRITE_REJECTED
    assert degraded["message"] == (
        f'create pod {INSTANCE}: 422 Invalid: Secret "exporter-config-{INSTANCE}" is '
        "invalid: data: Too long: may not be more than 1048576 bytes"
    )
    # No word of the earlier state is left standing: the credentials came.
    assert condition_of(status, "Progressing")["reason"] != "WaitingForCredentials"
    # One Warning: the transition's, which carries the failure.
    assert _warnings(kube) == [
        ("ExporterSetDegraded", f"Degraded True (WriteRejected): {degraded['message']}")
    ]

    # Retries that fail the same way write nothing more.
    _seen(controller, status, "2")
    for _ in range(3):
        with pytest.raises(StepFailed):
            controller.sync((NS, SET))
    assert len(kube.statuses) == 1 and len(kube.events) == 1

    # Another failure: its own Warning, and the status says it.
    kube.refuse[SECRETS.plural] = ApiError(403, "Forbidden", 'secrets "x" is forbidden: quota')
    with pytest.raises(StepFailed):
        controller.sync((NS, SET))
    assert condition_of(kube.statuses[-1], "Degraded")["message"].endswith("quota")
    assert [reason for reason, _ in _warnings(kube)] == ["ExporterSetDegraded", WRITE_REJECTED]
    _seen(controller, kube.statuses[-1], "3")

    # Fixed: the Secret and the Pod are written and the pool recovers.
    del kube.refuse[SECRETS.plural]
    controller.sync((NS, SET))
    assert ("create", "secrets", f"exporter-config-{INSTANCE}") in kube.writes
    assert ("create", "pods", INSTANCE) in kube.writes
    assert condition_of(kube.statuses[-1], "Degraded")["reason"] == "AllReplicasHealthy"
    assert "ExporterSetRecovered" in [e["reason"] for e in kube.events]


def test_a_rendering_error_is_render_failed_and_transient_errors_are_only_retried(
    lab: tuple[Controller, RecordingKube], monkeypatch: pytest.MonkeyPatch
) -> None:
    controller, kube = lab
    qemu = controller.provisioner

    def broken(_ctx: Any) -> Obj:
        raise ValueError("a driver config that cannot be written")

    monkeypatch.setattr(qemu, "render_pod", broken)
    with pytest.raises(StepFailed) as failed:
        controller.sync((NS, SET))
    assert failed.value.failure.reason == RENDER_FAILED
    assert condition_of(kube.statuses[-1], "Degraded")["message"] == (
        f"create pod {INSTANCE}: ValueError: a driver config that cannot be written"
    )
    monkeypatch.undo()
    # A 500 or a 429 may pass by itself: retried, the status left alone.
    statuses = len(kube.statuses)
    for refused in (ApiError(500, "InternalError", "etcd"), ApiError(429, "TooManyRequests", "")):
        kube.refuse[PODS.plural] = refused
        with pytest.raises(ApiError):
            controller.sync((NS, SET))
    assert len(kube.statuses) == statuses


def test_classify_names_the_step_and_hides_the_name_the_apiserver_made_up() -> None:
    refused = ApiError(422, "Invalid", 'Exporter.jumpstarter.dev "pool-x7k2p" is invalid: bad')
    failure = classify("create pool-*", refused, generated="pool-")
    assert failure is not None
    assert failure.message == '422 Invalid: Exporter.jumpstarter.dev "pool-*" is invalid: bad'
    assert classify("create pool-*", ApiError(413, "RequestEntityTooLarge", "limit is 3145728"))
    for transient in (404, 409, 429, 500, 503):
        assert classify("x", ApiError(transient, "", "")) is None
    assert classify("x", ConnectionError("reset")) is None
    assert trimmed("a  b\n c") == "a b c"
    assert len(trimmed("x" * 1000)) == 400


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "reconciler.controller"]


def test_a_lane_pass_logs_what_it_did_and_the_ordinary_pass_only_the_rest(
    lab: tuple[Controller, RecordingKube], caplog: pytest.LogCaptureFixture
) -> None:
    controller, kube = lab
    caplog.set_level(logging.INFO, "reconciler.controller")
    # A Lease takes the instance and a second one waits: the refill lane creates one.
    leases = controller.informers[JUMPSTARTER_LEASES]
    for name, exporter in (("lease-1", INSTANCE), ("lease-2", "")):
        status = {"exporterRef": {"name": exporter}} if exporter else {}
        leases.apply(
            "ADDED",
            {
                "metadata": {"name": name, "namespace": NS},
                "spec": {"selector": {"matchLabels": {"board": SET}}},
                "status": status,
            },
        )
    controller.informers[EXPORTERS].apply("MODIFIED", _exporter(INSTANCE, lease="lease-1"))
    controller.sync((NS, SET), Lane.REFILL)
    refill = _lines(caplog)
    assert refill == [
        f"{NS}/{SET}: create 2 ({SET}-*): warm buffer 1, pending leases 1, available 0"
    ]
    created = [w for w in kube.writes if w[:2] == ("create", "exporters")]
    caplog.clear()
    controller.sync((NS, SET), Lane.PODS)  # the Pod of the credentialed instance
    pods_lane = _lines(caplog)
    assert pods_lane == [f"{NS}/{SET}: create pod {INSTANCE}: credentials issued, no Pod yet"]
    caplog.clear()
    controller.sync((NS, SET))
    ordinary = _lines(caplog)
    assert ordinary == [
        f"{NS}/{SET}: protect {INSTANCE}: serves lease lease-1; marked as having served it"
    ]
    # Each step logged once, one write per step (creates by their count).
    every = refill + pods_lane + ordinary
    creates = [line.split(": create ")[1] for line in every if ": create " in line]
    assert sum(int(c.split(" ")[0]) for c in creates if not c.startswith("pod ")) == len(created)
    assert (
        sum(1 for line in every if "create pod" in line)
        == sum(1 for w in kube.writes if w[:2] == ("create", "pods"))
        == 1
    )
    protect = [line for line in every if f": protect {INSTANCE}" in line]
    assert len(protect) == 1
    assert sum(1 for w in kube.writes if w == ("patch", "exporters", INSTANCE)) == 1
