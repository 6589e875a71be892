"""A double of Jumpstarter's controller, built from `jumpstarter-protocol`'s stubs, for the
tests where a real `jmp run` registers (loopback e2e and the node tier) and a real client
leases it (the node tier). It plays Jumpstarter's side only; the exporter and the client
are Jumpstarter's release.

It serves TLS with a certificate of its own CA (the CA a pool's config carries), on one
port: the ControllerService an exporter talks to (Register, ReportStatus, Status,
Unregister; with leases Listen, Dial, ReleaseLease), the ClientService a client talks to
and the lease controller behind it (`tests.lease_double`), and the RouterService that
relays a client's driver calls to the exporter it leased (`tests.router_double`). It
records what each exporter presents.

Given a Kubernetes client, it also writes the Exporter's status as Jumpstarter's
controller does for a connected exporter (controller_service.go and the exporter
controller of jumpstarter-dev/jumpstarter): it authenticates the bearer token against the
Exporter's credential Secret; Register stores `devices` and sets `Registered=True`
(reason `Register`); ReportStatus stores `exporterStatus` and `lastSeen` and syncs
`Online` (`StatusReported`, or `Offline` when the exporter reports it); a Status stream
refreshes `lastSeen` and sets `Online=True` (`Seen`); Unregister clears `devices`
(`Registered=False`, `Unregister`). Jumpstarter's one-minute "last seen" timeout is not
played: the tests read Pod phases for an exporter that went away.

Leases (`double.leases.serve(namespace)`: only there, so tests that write `leaseRef` by
hand elsewhere keep their Exporters to themselves): the Status stream tells an exporter
when its `status.leaseRef` names a Lease (`leased`, the lease and its client) and when it
no longer does; Listen (the lease's holder only) hands the exporter each connection a
client dials; Dial (the lease's client only, once the exporter reports LeaseReady, waiting
up to 30 s while it is still Available, as Jumpstarter does) issues a router token for
both sides and returns the router's endpoint: this same address.
"""

from __future__ import annotations

import base64
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from jumpstarter.common.enums import ExporterStatus
from jumpstarter_protocol.jumpstarter.client.v1 import client_pb2_grpc
from jumpstarter_protocol.jumpstarter.v1 import (
    jumpstarter_pb2,
    jumpstarter_pb2_grpc,
    router_pb2_grpc,
)

from certs.authority import CertificateSet, ensure_certificates
from pool.model.jumpstarter import TOKEN_KEY
from tests.lease_double import LeaseDouble, now, set_condition
from tests.router_double import RouterDouble

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


def _status_name(value: int) -> str:
    """A proto ExporterStatus as the CRD spells it: EXPORTER_STATUS_LEASE_READY -> LeaseReady."""
    return "".join(part.capitalize() for part in ExporterStatus(value).name.split("_"))


@dataclass
class ControllerDouble(jumpstarter_pb2_grpc.ControllerServiceServicer):  # type: ignore[misc]
    """Jumpstarter's ControllerService."""

    api_client: Any = None  # kubernetes.client.ApiClient: write Exporter status when given
    registrations: list[Registration] = field(default_factory=list)
    refused: int = 0  # calls whose token did not match the Exporter's credential
    stopping: threading.Event = field(default_factory=threading.Event)
    router: RouterDouble = field(default_factory=RouterDouble)
    router_endpoint: str = ""  # where Dial sends both sides: the double's own address
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # (namespace, lease) -> the queue of the exporter's current Listen stream
    _listeners: dict[tuple[str, str], queue.Queue[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.leases: LeaseDouble | None = None
        if self.api_client is not None:
            from kubernetes import client

            self.core = client.CoreV1Api(self.api_client)
            self.custom = client.CustomObjectsApi(self.api_client)
            self.leases = LeaseDouble(self.api_client)

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
                    conditions = set_condition(conditions, kind, value, reason, message)
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
                "lastSeen": now(),
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
                    "lastSeen": now(),
                    "conditions": [("Online", True, "Seen", "Last seen less than 1 minute ago")],
                },
            )
        if self.leases is None or not self.leases.serves(namespace):
            yield jumpstarter_pb2.StatusResponse(leased=False)
            while context.is_active() and not self.stopping.wait(0.2):
                pass
            return
        sent: tuple[str, str] | None | bool = False  # nothing sent yet
        while context.is_active() and not self.stopping.is_set():
            held = self.leases.lease_of(namespace, name)
            if held != sent:
                sent = held
                if held is None:
                    yield jumpstarter_pb2.StatusResponse(leased=False)
                else:
                    lease, client = held
                    yield jumpstarter_pb2.StatusResponse(
                        leased=True, lease_name=lease, client_name=client
                    )
            self.stopping.wait(0.1)

    def Listen(self, request: Any, context: Any) -> Iterator[Any]:
        caller = self._exporter(context)
        if caller is None or self.leases is None:
            return
        namespace, name, _ = caller
        lease = self.leases.get("leases", namespace, request.lease_name)
        if ((lease.get("status") or {}).get("exporterRef") or {}).get("name") != name:
            context.abort(grpc.StatusCode.UNKNOWN, "permission denied")
            return
        mine: queue.Queue[Any] = queue.Queue()
        key = (namespace, request.lease_name)
        with self._lock:
            previous = self._listeners.get(key)
            self._listeners[key] = mine  # a reconnecting Listen supersedes the old one
        if previous is not None:
            previous.put(None)
        try:
            while context.is_active() and not self.stopping.is_set():
                try:
                    item = mine.get(timeout=0.2)
                except queue.Empty:
                    continue
                if item is None:
                    return
                yield item
        finally:
            with self._lock:
                if self._listeners.get(key) is mine:
                    del self._listeners[key]

    def Dial(self, request: Any, context: Any) -> Any:
        if self.leases is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no leases without a cluster")
            return None
        caller = self.leases.client_of(context)
        if caller is None:
            return None
        namespace, client = caller
        lease = self.leases.get("leases", namespace, request.lease_name)
        if lease["spec"]["clientRef"]["name"] != client:
            context.abort(grpc.StatusCode.UNKNOWN, "permission denied")
        exporter = ((lease.get("status") or {}).get("exporterRef") or {}).get("name")
        if not exporter:
            context.abort(grpc.StatusCode.UNKNOWN, "lease not active")
        self._wait_lease_ready(context, namespace, exporter)
        token = self.router.issue()
        with self._lock:
            listener = self._listeners.get((namespace, request.lease_name))
        if listener is None:
            context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"exporter is not listening on lease {request.lease_name}",
            )
        listener.put(
            jumpstarter_pb2.ListenResponse(router_endpoint=self.router_endpoint, router_token=token)
        )
        return jumpstarter_pb2.DialResponse(
            router_endpoint=self.router_endpoint, router_token=token
        )

    def _wait_lease_ready(self, context: Any, namespace: str, exporter: str) -> None:
        """Jumpstarter's check of the exporter's status before a Dial: LeaseReady (or a
        hook, or unreported), waiting up to 30 s while it is still Available."""
        deadline, delay = time.monotonic() + 30, 0.5
        while True:
            found = self.leases.get("exporters", namespace, exporter) if self.leases else {}
            reported = (found.get("status") or {}).get("exporterStatus") or ""
            if reported in ("LeaseReady", "BeforeLeaseHook", "AfterLeaseHook", "Unspecified", ""):
                return
            if reported != "Available" or time.monotonic() + delay > deadline:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"exporter is not ready (status: {reported})",
                )
            time.sleep(delay)
            delay = min(delay * 2, 3.0)

    def ReleaseLease(self, request: Any, context: Any) -> Any:
        """An exporter ends the lease it holds (after its afterLease hook)."""
        caller = self._exporter(context)
        if caller is None or self.leases is None:
            return None
        namespace, name, _ = caller
        lease = self.leases.get("leases", namespace, request.name)
        if ((lease.get("status") or {}).get("exporterRef") or {}).get("name") != name:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "lease not held by exporter")
        if not (lease.get("status") or {}).get("ended"):
            self.leases.release(namespace, request.name)
        return jumpstarter_pb2.ReleaseLeaseResponse()

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


# Clients and exporters ping every 20 s, idle or not (`jumpstarter.common.grpc`): let them.
SERVER_OPTIONS = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
]


def serve_controller(
    workdir: Path, host: str, port: int, *, api_client: Any = None, names: Sequence[str] = ()
) -> RunningController:
    """Start the double on host:port (0: a free port), serving TLS with a certificate for
    `host` (and `names`) from a CA kept in `workdir`; with `api_client`, its lease
    controller runs too (for the namespaces `double.leases.serve` names)."""
    certificates = ensure_certificates(
        workdir / "controller-certs", "jumpstarter-grpc", "tests", [host, *names]
    )
    double = ControllerDouble(api_client)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), options=SERVER_OPTIONS)
    jumpstarter_pb2_grpc.add_ControllerServiceServicer_to_server(double, server)
    router_pb2_grpc.add_RouterServiceServicer_to_server(double.router, server)
    if double.leases is not None:
        client_pb2_grpc.add_ClientServiceServicer_to_server(double.leases, server)
    credentials = grpc.ssl_server_credentials(
        [(certificates.key.read_bytes(), certificates.cert.read_bytes())]
    )
    bound = server.add_secure_port(f"{host}:{port}", credentials)  # port 0: any free one
    server.start()
    double.router_endpoint = f"{host}:{bound}"
    if double.leases is not None:
        threading.Thread(target=double.leases.run, args=(double.stopping,), daemon=True).start()
    return RunningController(double, double.router_endpoint, certificates, server)
