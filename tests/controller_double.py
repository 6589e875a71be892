"""A double of Jumpstarter's gRPC ControllerService, built from `jumpstarter-protocol`'s
stubs, for the tests where a real `jmp run` registers (loopback e2e and the node tier).

It serves TLS with a certificate of its own CA (the CA a pool's config carries) and
answers as much of the service as an exporter without a lease uses: Register,
ReportStatus, Status (never leased), Unregister. It records what each exporter presents.

Given a Kubernetes client, it also writes the Exporter's status as Jumpstarter's
controller does for a connected exporter (controller_service.go and the exporter
controller of jumpstarter-dev/jumpstarter): it authenticates the bearer token against the
Exporter's credential Secret; Register stores `devices` and sets `Registered=True`
(reason `Register`); ReportStatus stores `exporterStatus` and `lastSeen` and syncs
`Online` (`StatusReported`, or `Offline` when the exporter reports it); a Status stream
refreshes `lastSeen` and sets `Online=True` (`Seen`); Unregister clears `devices`
(`Registered=False`, `Unregister`). Jumpstarter's one-minute "last seen" timeout is not
played: the tests read Pod phases for an exporter that went away.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from jumpstarter.common.enums import ExporterStatus
from jumpstarter_protocol.jumpstarter.v1 import jumpstarter_pb2, jumpstarter_pb2_grpc

from certs.authority import CertificateSet, ensure_certificates
from reconciler.model.jumpstarter import TOKEN_KEY

__all__ = ["ControllerDouble", "Registration", "RunningController", "serve_controller"]

# Drivers Jumpstarter 0.9.0 starts without hardware; the exporter image carries them (and
# the `tcp` TcpNetwork driver the provisioner adds, and the Composite `jmp run` wraps).
DRIVERS = [
    {"name": "power", "type": "jumpstarter_driver_power.driver.MockPower"},
    {
        "name": "serial",
        "type": "jumpstarter_driver_pyserial.driver.PySerial",
        "config": {"url": "loop://"},
    },
]

_GROUP, _VERSION, _PLURAL = "jumpstarter.dev", "v1alpha1", "exporters"


@dataclass
class Registration:
    metadata: dict[str, str]
    labels: dict[str, str]
    driver_names: list[str]
    peer: str = ""  # gRPC's peer address, e.g. "ipv4:10.213.0.7:41234"

    @property
    def peer_ip(self) -> str:
        return self.peer.split(":")[1] if self.peer.startswith("ipv4:") else ""

    @property
    def exporter(self) -> tuple[str, str]:
        """(namespace, name) of the Exporter that registered."""
        return self.metadata["jumpstarter-namespace"], self.metadata["jumpstarter-name"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_name(value: int) -> str:
    """A proto ExporterStatus as the CRD spells it: EXPORTER_STATUS_LEASE_READY -> LeaseReady."""
    return "".join(part.capitalize() for part in ExporterStatus(value).name.split("_"))


def _set_condition(
    conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str = ""
) -> list[dict[str, Any]]:
    """meta.SetStatusCondition: lastTransitionTime moves only when the status changes."""
    value = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == kind), None)
    since = old["lastTransitionTime"] if old and old.get("status") == value else _now()
    entry = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    return [*(c for c in conditions if c.get("type") != kind), entry]


@dataclass
class ControllerDouble(jumpstarter_pb2_grpc.ControllerServiceServicer):  # type: ignore[misc]
    """Jumpstarter's ControllerService for exporters that are never leased."""

    api_client: Any = None  # kubernetes.client.ApiClient: write Exporter status when given
    registrations: list[Registration] = field(default_factory=list)
    refused: int = 0  # calls whose token did not match the Exporter's credential
    stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.api_client is not None:
            from kubernetes import client

            self.core = client.CoreV1Api(self.api_client)
            self.custom = client.CustomObjectsApi(self.api_client)

    # -- what Jumpstarter's controller does with the Exporter object -----------------

    def _exporter(self, context: Any) -> tuple[str, str, dict[str, Any]] | None:
        """The calling exporter (namespace, name, object), its token checked against the
        credential Secret; None (after aborting the call) when it does not match."""
        metadata = dict(context.invocation_metadata())
        namespace, name = (
            metadata.get("jumpstarter-namespace", ""),
            metadata.get("jumpstarter-name", ""),
        )
        if self.api_client is None:
            return namespace, name, {}
        from kubernetes.client.exceptions import ApiException

        try:
            exporter = self.custom.get_namespaced_custom_object(
                _GROUP, _VERSION, namespace, _PLURAL, name
            )
            secret_name = ((exporter.get("status") or {}).get("credential") or {}).get("name")
            secret = self.core.read_namespaced_secret(secret_name, namespace)
            token = base64.b64decode((secret.data or {}).get(TOKEN_KEY, "")).decode()
        except (ApiException, TypeError, ValueError):
            token, exporter = "", {}
        if not token or metadata.get("authorization") != f"Bearer {token}":
            with self._lock:
                self.refused += 1
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unable to authenticate exporter")
            return None
        return namespace, name, exporter

    def _patch_status(self, namespace: str, name: str, change: dict[str, Any]) -> None:
        if self.api_client is None:
            return
        from kubernetes.client.exceptions import ApiException

        with self._lock:  # read-modify-write of the conditions list
            try:
                current = self.custom.get_namespaced_custom_object(
                    _GROUP, _VERSION, namespace, _PLURAL, name
                )
                status = dict(current.get("status") or {})
                conditions = list(status.get("conditions") or [])
                for kind, value, reason, message in change.pop("conditions", []):
                    conditions = _set_condition(conditions, kind, value, reason, message)
                body = {"status": {**change, "conditions": conditions}}
                self.custom.patch_namespaced_custom_object_status(
                    _GROUP, _VERSION, namespace, _PLURAL, name, body
                )
            except ApiException as exc:
                if exc.status != 404:  # an Exporter deleted meanwhile has no status to keep
                    raise

    # -- the service ---------------------------------------------------------------

    def Register(self, request: Any, context: Any) -> Any:
        caller = self._exporter(context)
        if caller is None:
            return None
        namespace, name, exporter = caller
        names = [
            r.labels["jumpstarter.dev/name"]
            for r in request.reports
            if r.labels.get("jumpstarter.dev/name")
        ]
        devices = [
            {"uuid": r.uuid, "parentUuid": r.parent_uuid, "labels": dict(r.labels)}
            for r in request.reports
        ]
        self._patch_status(
            namespace,
            name,
            {"devices": devices, "conditions": [("Registered", True, "Register", "")]},
        )
        with self._lock:
            self.registrations.append(
                Registration(
                    dict(context.invocation_metadata()),
                    dict(request.labels),
                    names,
                    context.peer(),
                )
            )
        uid = (exporter.get("metadata") or {}).get("uid") or "e2e"
        return jumpstarter_pb2.RegisterResponse(uuid=uid)

    def ReportStatus(self, request: Any, context: Any) -> Any:
        caller = self._exporter(context)
        if caller is None:
            return None
        namespace, name, _ = caller
        reported = _status_name(request.status)
        online = reported not in ("Offline", "Unspecified")
        self._patch_status(
            namespace,
            name,
            {
                "exporterStatus": reported,
                "statusMessage": request.message,
                "lastSeen": _now(),
                "conditions": [
                    (
                        "Online",
                        online,
                        "StatusReported" if online else "Offline",
                        f"Exporter reported status: {reported}" if online else request.message,
                    )
                ],
            },
        )
        return jumpstarter_pb2.ReportStatusResponse()

    def Unregister(self, request: Any, context: Any) -> Any:
        caller = self._exporter(context)
        if caller is None:
            return None
        namespace, name, _ = caller
        self._patch_status(
            namespace,
            name,
            {"devices": None, "conditions": [("Registered", False, "Unregister", "")]},
        )
        return jumpstarter_pb2.UnregisterResponse()

    def Status(self, request: Any, context: Any) -> Iterator[Any]:
        caller = self._exporter(context)
        if caller is None:
            return
        namespace, name, exporter = caller
        if (exporter.get("status") or {}).get("exporterStatus") != "Offline":
            self._patch_status(
                namespace,
                name,
                {
                    "lastSeen": _now(),
                    "conditions": [("Online", True, "Seen", "Last seen less than 1 minute ago")],
                },
            )
        yield jumpstarter_pb2.StatusResponse(leased=False)
        while context.is_active() and not self.stopping.wait(0.2):
            pass

    def registered(self) -> set[tuple[str, str]]:
        """Every (namespace, name) that has registered so far."""
        with self._lock:
            return {r.exporter for r in self.registrations}


@dataclass
class RunningController:
    double: ControllerDouble
    endpoint: str  # host:port, as an Exporter's status.endpoint names it
    certificates: CertificateSet
    server: Any  # grpc.Server

    def stop(self) -> None:
        self.double.stopping.set()
        self.server.stop(grace=1).wait()


def serve_controller(
    workdir: Path, host: str, port: int, *, api_client: Any = None, names: Sequence[str] = ()
) -> RunningController:
    """Start the double on host:port (0: a free port), serving TLS with a certificate for
    `host` (and `names`) from a CA kept in `workdir`."""
    certificates = ensure_certificates(
        workdir / "controller-certs", "jumpstarter-grpc", "tests", [host, *names]
    )
    double = ControllerDouble(api_client)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    jumpstarter_pb2_grpc.add_ControllerServiceServicer_to_server(double, server)
    credentials = grpc.ssl_server_credentials(
        [(certificates.key.read_bytes(), certificates.cert.read_bytes())]
    )
    bound = server.add_secure_port(f"{host}:{port}", credentials)  # port 0: any free one
    server.start()
    return RunningController(double, f"{host}:{bound}", certificates, server)
