"""The lease side of the double of Jumpstarter's controller, from `jumpstarter-protocol`'s
stubs and the Kubernetes objects Jumpstarter keeps (release 0.9.0's controller:
`service/client/v1/client_service.go`, `controller/lease_controller.go`,
`controller/exporter_controller.go`, `api/v1alpha1/lease_helpers.go`).

- **ClientService** for a client (`jmp`, or `ClientConfigV1Alpha1.lease()` in Python):
  CreateLease makes a `jumpstarter.dev/v1alpha1` Lease (selector from the request, owned
  by no one yet, `spec.clientRef`, `spec.duration`), GetLease and GetExporter read the
  objects back as the protocol's messages, DeleteLease sets `spec.release`. A client is
  authenticated by the token this double issued it (`add_client`; Jumpstarter's are
  Client objects and their credentials).
- **The lease controller**, for the namespaces it serves (`serve`): a pending Lease gets
  the first (by name) of the Exporters its selector matches that are enabled, Registered
  and Online, held by no active Lease and whose `exporterStatus` is Available,
  Unspecified or empty (`status.exporterRef`, `beginTime`, condition `Ready` True, the
  Exporter as its controller owner), else a `Pending` reason; a released or expired
  Lease ends (`ended`, `endTime`, `Ready` False `Released`/`Expired`, label
  `jumpstarter.dev/lease-ended`); a Lease no exporter can ever take is `Unsatisfiable`.
  A Lease booked for later (`spec.beginTime` ahead) is left as it is, no exporter and no
  condition, until that moment; it expires at `spec.endTime`, else `spec.beginTime` plus
  `spec.duration`, else its actual begin plus the duration (0.9.0's
  `controller/internal/controller/lease_controller.go`, `reconcileStatusExporterRef` and
  `reconcileStatusEnded`). CreateLease books `begin_time`/`end_time` as
  `LeaseFromProtobuf` does (`api/v1alpha1/lease_helpers.go`, `ReconcileLeaseTimeFields`).
- **The exporter controller's `status.leaseRef`**: each Exporter names the active Lease
  that holds it, and none otherwise.

It polls its namespaces (every 0.2 s, at once after a lease request or release) where
Jumpstarter's controllers watch. `lease_of` gives the ControllerService double what the
exporter's Status stream reports. Each lease's request, assignment and release moments
are kept (`times`).
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from google.protobuf import duration_pb2, timestamp_pb2
from jumpstarter_protocol.jumpstarter.client.v1 import client_pb2, client_pb2_grpc
from jumpstarter_protocol.jumpstarter.v1 import kubernetes_pb2

__all__ = ["GROUP", "LeaseDouble", "LeaseTimes", "now", "requested_times", "set_condition"]

GROUP, VERSION = "jumpstarter.dev", "v1alpha1"
ENDED_LABEL = "jumpstarter.dev/lease-ended"
_READY_STATUSES = ("Available", "Unspecified", "")
Obj = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def set_condition(
    conditions: list[Obj], kind: str, status: bool, reason: str, message: str = ""
) -> list[Obj]:
    """meta.SetStatusCondition: lastTransitionTime moves only when the status changes."""
    value = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == kind), None)
    since = old["lastTransitionTime"] if old and old.get("status") == value else now()
    entry = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    return [*(c for c in conditions if c.get("type") != kind), entry]


def _true(conditions: list[Obj], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def go_duration(seconds: int) -> str:
    """A whole number of seconds as Go's time.Duration prints it (metav1.Duration)."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _seconds(duration: str) -> float:
    total, number = 0.0, ""
    for char in duration:
        if char.isdigit() or char == ".":
            number += char
        else:
            total += float(number or 0) * {"h": 3600, "m": 60, "s": 1}[char]
            number = ""
    return total


def parse_selector(text: str) -> dict[str, str]:
    """The equality requirements of a label selector (`a=b,c==d`); the double takes
    only those (ValueError for set-based ones)."""
    labels: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.replace("==", "=").partition("=")
        if not sep or "!" in key or not key:
            raise ValueError(f"the double takes equality selectors only, not {part!r}")
        labels[key.strip()] = value.strip()
    return labels


def _time(text: str | None) -> timestamp_pb2.Timestamp | None:
    if not text:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(_parse_time(text))
    return stamp


def lease_message(lease: Obj) -> Any:
    """`Lease.ToProtobuf` of Jumpstarter's API."""
    meta, spec, status = lease["metadata"], lease.get("spec") or {}, lease.get("status") or {}
    namespace = meta["namespace"]
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    message = client_pb2.Lease(
        name=f"namespaces/{namespace}/leases/{meta['name']}",
        selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        client=f"namespaces/{namespace}/clients/{spec['clientRef']['name']}",
    )
    for condition in status.get("conditions") or []:
        moment = _parse_time(condition["lastTransitionTime"])
        message.conditions.append(
            kubernetes_pb2.Condition(
                type=condition["type"],
                status=condition["status"],
                observedGeneration=int(condition.get("observedGeneration") or 0),
                lastTransitionTime=kubernetes_pb2.Time(seconds=int(moment.timestamp())),
                reason=condition.get("reason", ""),
                message=condition.get("message", ""),
            )
        )
    if spec.get("duration"):
        message.duration.CopyFrom(duration_pb2.Duration(seconds=int(_seconds(spec["duration"]))))
    for field_name, key in (("begin_time", "beginTime"), ("end_time", "endTime")):
        requested = _time(spec.get(key))
        if requested is not None:  # the requested times, from the spec (`ToProtobuf`)
            getattr(message, field_name).CopyFrom(requested)
    begin, end = _time(status.get("beginTime")), _time(status.get("endTime"))
    if begin is not None:
        message.effective_begin_time.CopyFrom(begin)
        until = _parse_time(status["endTime"]) if end is not None else datetime.now(UTC)
        elapsed = max((until - _parse_time(status["beginTime"])).total_seconds(), 0)
        message.effective_duration.CopyFrom(duration_pb2.Duration(seconds=int(elapsed)))
    if end is not None:
        message.effective_end_time.CopyFrom(end)
    exporter = (status.get("exporterRef") or {}).get("name")
    if exporter:
        message.exporter = f"namespaces/{namespace}/exporters/{exporter}"
    return message


@dataclass
class LeaseTimes:
    """Moments (time.monotonic()) of one lease, as this double saw them."""

    requested: float
    assigned: float | None = None
    exporter: str = ""
    released: float | None = None
    ended: float | None = None


@dataclass
class LeaseDouble(client_pb2_grpc.ClientServiceServicer):  # type: ignore[misc]
    """Jumpstarter's ClientService, lease controller and `status.leaseRef`."""

    api_client: Any  # kubernetes.client.ApiClient
    interval: float = 0.2
    times: dict[tuple[str, str], LeaseTimes] = field(default_factory=dict)
    _namespaces: set[str] = field(default_factory=set)
    _clients: dict[str, tuple[str, str]] = field(default_factory=dict)  # token -> (ns, name)
    _held: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _wake: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(self.api_client)

    # -- set-up ------------------------------------------------------------------------

    def serve(self, namespace: str) -> None:
        """Run the lease controller in `namespace` too."""
        with self._lock:
            self._namespaces.add(namespace)

    def forget(self, namespace: str) -> None:
        """Serve `namespace` no more."""
        with self._lock:
            self._namespaces.discard(namespace)

    def serves(self, namespace: str) -> bool:
        with self._lock:
            return namespace in self._namespaces

    def add_client(self, namespace: str, name: str) -> str:
        """A client's token (what `jmp login` would store in its ClientConfig)."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._clients[token] = (namespace, name)
        return token

    def client_of(self, context: Any, namespace: str | None = None) -> tuple[str, str] | None:
        """The calling client (namespace, name), or None after aborting the call."""
        metadata = dict(context.invocation_metadata())
        token = str(metadata.get("authorization", "")).removeprefix("Bearer ")
        with self._lock:
            found = self._clients.get(token)
        if found is None or (namespace is not None and found[0] != namespace):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unable to authenticate client")
            return None
        return found

    def lease_of(self, namespace: str, exporter: str) -> tuple[str, str] | None:
        """(lease, client) of the Lease the Exporter's `status.leaseRef` names."""
        with self._lock:
            return self._held.get((namespace, exporter))

    # -- objects -----------------------------------------------------------------------

    def get(self, plural: str, namespace: str, name: str) -> Obj:
        found: Obj = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, name
        )
        return found

    def _list(self, plural: str, namespace: str) -> list[Obj]:
        listed = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
        items: list[Obj] = listed["items"]
        return items

    def _patch_status(self, plural: str, lease: Obj, status: Obj) -> None:
        meta = lease["metadata"]
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, meta["namespace"], plural, meta["name"], {"status": status}
        )

    def release(self, namespace: str, name: str) -> None:
        """`spec.release: true`, as DeleteLease (and an exporter's ReleaseLease) writes it."""
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "leases", name, {"spec": {"release": True}}
        )
        with self._lock:
            times = self.times.get((namespace, name))
            if times is not None and times.released is None:
                times.released = time.monotonic()
        self._wake.set()

    # -- the ClientService -------------------------------------------------------------

    @staticmethod
    def _split(identifier: str, kind: str, context: Any) -> tuple[str, str]:
        parts = identifier.split("/")
        if len(parts) != 4 or parts[0] != "namespaces" or parts[2] != kind:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid identifier {identifier!r}")
        return parts[1], parts[3]

    def CreateLease(self, request: Any, context: Any) -> Any:
        namespace = request.parent.removeprefix("namespaces/")
        caller = self.client_of(context, namespace)
        if caller is None:
            return None
        try:
            labels = parse_selector(request.lease.selector)
        except ValueError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        name = request.lease_id or str(uuid.uuid4())
        spec: Obj = {
            "clientRef": {"name": caller[1]},
            "selector": {"matchLabels": labels},
        }
        spec.update(requested_times(request.lease))
        if request.lease.exporter_name:
            spec["exporterRef"] = {"name": request.lease.exporter_name}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": spec,
        }
        with self._lock:
            self.times[(namespace, name)] = LeaseTimes(time.monotonic())
        created = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "leases", body
        )
        self._wake.set()
        return lease_message(created)

    def GetLease(self, request: Any, context: Any) -> Any:
        namespace, name = self._split(request.name, "leases", context)
        if self.client_of(context, namespace) is None:
            return None
        return lease_message(self.get("leases", namespace, name))

    def DeleteLease(self, request: Any, context: Any) -> Any:
        from google.protobuf import empty_pb2

        namespace, name = self._split(request.name, "leases", context)
        caller = self.client_of(context, namespace)
        if caller is None:
            return None
        lease = self.get("leases", namespace, name)
        if lease["spec"]["clientRef"]["name"] != caller[1]:
            context.abort(grpc.StatusCode.UNKNOWN, "DeleteLease permission denied")
        if lease["spec"].get("release"):
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f'lease "{request.name}" has already been released',
            )
        self.release(namespace, name)
        return empty_pb2.Empty()

    def GetExporter(self, request: Any, context: Any) -> Any:
        namespace, name = self._split(request.name, "exporters", context)
        if self.client_of(context, namespace) is None:
            return None
        from jumpstarter.common.enums import ExporterStatus

        exporter = self.get("exporters", namespace, name)
        status = exporter.get("status") or {}
        reported = str(status.get("exporterStatus") or "Unspecified")
        snake = "".join(f"_{c}" if c.isupper() else c for c in reported).lstrip("_").upper()
        return client_pb2.Exporter(
            name=request.name,
            labels=exporter["metadata"].get("labels") or {},
            online=_true(status.get("conditions") or [], "Online"),
            status=ExporterStatus[snake].to_proto(),
            status_message=status.get("statusMessage") or "",
            enabled=(exporter.get("spec") or {}).get("enabled") is not False,
        )

    # -- the lease controller and the exporter controller's leaseRef -------------------

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self._lock:
                namespaces = sorted(self._namespaces)
            for namespace in namespaces:
                try:
                    self.sync(namespace)
                except Exception as error:  # the next pass tries again, as a requeue would
                    print(f"lease double: {namespace}: {error}")
            self._wake.wait(self.interval)
            self._wake.clear()

    def sync(self, namespace: str) -> None:
        leases = sorted(
            self._list("leases", namespace),
            key=lambda lease: lease["metadata"]["creationTimestamp"],
        )
        exporters = {e["metadata"]["name"]: e for e in self._list("exporters", namespace)}
        for lease in leases:
            status = lease.setdefault("status", {})
            if status.get("ended"):
                continue
            if (lease.get("spec") or {}).get("release"):
                self._end(lease, "Released", "The lease was marked for release")
            elif self._expired(lease):
                self._end(lease, "Expired", "The lease has expired")
            elif not (status.get("exporterRef") or {}).get("name") and not _booked_ahead(lease):
                self._assign(lease, leases, exporters)
        held = {_holder(lease): lease for lease in leases if _holder(lease)}
        for name, exporter in exporters.items():
            lease = held.get(name)
            want = lease["metadata"]["name"] if lease else None
            have = ((exporter.get("status") or {}).get("leaseRef") or {}).get("name")
            if want != have:
                self._patch_status("exporters", exporter, {"leaseRef": want and {"name": want}})
            with self._lock:
                if lease is None:
                    self._held.pop((namespace, name), None)
                else:
                    client = lease["spec"]["clientRef"]["name"]
                    self._held[(namespace, name)] = (lease["metadata"]["name"], client)

    @staticmethod
    def _expired(lease: Obj) -> bool:
        """`reconcileStatusEnded` of 0.9.0's lease controller: a begun Lease expires at
        `spec.endTime`, else at `spec.beginTime` plus `spec.duration` (a scheduled lease),
        else at its actual begin plus the duration. A Lease with neither end nor duration
        (CreateLease refuses one; a test may write it) never expires here."""
        spec, begun = lease.get("spec") or {}, lease["status"].get("beginTime")
        duration = timedelta(seconds=_seconds(spec["duration"])) if spec.get("duration") else None
        if not begun:
            return False
        if spec.get("endTime"):
            expiration = _parse_time(spec["endTime"])
        elif duration is None:
            return False
        else:
            expiration = _parse_time(spec.get("beginTime") or begun) + duration
        return expiration < datetime.now(UTC)

    def _end(self, lease: Obj, reason: str, message: str) -> None:
        status = lease["status"]
        conditions = set_condition(status.get("conditions") or [], "Ready", False, reason, message)
        status.update(ended=True, endTime=now(), conditions=conditions)
        self._patch_status("leases", lease, status)
        meta = lease["metadata"]
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], "leases", meta["name"],
            {"metadata": {"labels": {ENDED_LABEL: "true"}}},
        )  # fmt: skip
        with self._lock:
            times = self.times.get((meta["namespace"], meta["name"]))
            if times is not None:
                times.ended = time.monotonic()

    def _set(self, lease: Obj, condition: str, reason: str, message: str) -> None:
        status = lease["status"]
        status["conditions"] = set_condition(
            status.get("conditions") or [], condition, True, reason, message
        )
        if condition in ("Unsatisfiable", "Invalid"):
            status.update(ended=True, endTime=now())
        self._patch_status("leases", lease, status)

    def _assign(self, lease: Obj, leases: list[Obj], exporters: Mapping[str, Obj]) -> None:
        spec = lease.get("spec") or {}
        wanted = (spec.get("selector") or {}).get("matchLabels") or {}
        pinned = (spec.get("exporterRef") or {}).get("name")
        matching = [
            e
            for name, e in sorted(exporters.items())
            if wanted.items() <= (e["metadata"].get("labels") or {}).items()
            and (pinned is None or name == pinned)
        ]
        enabled = [e for e in matching if (e.get("spec") or {}).get("enabled") is not False]
        if not matching:
            self._set(
                lease,
                "Unsatisfiable",
                "NoAccess",
                "While there are 0 exporters matching the selector, none of them are approved "
                "by any policy for your client",
            )
            return
        if not enabled:
            message = f"All {len(matching)} exporters matching the selector are disabled"
            self._set(lease, "Unsatisfiable", "AllDisabled", message)
            return
        online = [
            e
            for e in enabled
            if _true(conditions(e), "Registered") and _true(conditions(e), "Online")
        ]
        if not online:
            first = enabled[0]["metadata"]["name"]
            message = (
                f"While there are {len(enabled)} available exporters (i.e. {first}), "
                "none of them are online"
            )
            self._set(lease, "Pending", "Offline", message)
            return
        taken = {_holder(other) for other in leases}
        free = [e for e in online if e["metadata"]["name"] not in taken]
        if not free:
            first = online[0]["metadata"]["name"]
            message = (
                f"There are {len(online)} approved exporters, (i.e. {first}) but all of them "
                "are already leased"
            )
            self._set(lease, "Pending", "NotAvailable", message)
            return
        ready = [
            e for e in free if (e.get("status") or {}).get("exporterStatus", "") in _READY_STATUSES
        ]
        if not ready:
            message = (
                f"There are {len(free)} online exporters, but none are ready (still cleaning "
                "up previous lease)"
            )
            self._set(lease, "Pending", "NotReady", message)
            return
        chosen = ready[0]
        name = chosen["metadata"]["name"]
        status = lease["status"]
        status["exporterRef"] = {"name": name}
        status["beginTime"] = now()
        status["conditions"] = set_condition(
            status.get("conditions") or [],
            "Ready",
            True,
            "Ready",
            "An exporter has been acquired for the client",
        )
        self._patch_status("leases", lease, status)
        meta = lease["metadata"]
        owner = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Exporter",
            "name": name,
            "uid": chosen["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], "leases", meta["name"],
            {"metadata": {"ownerReferences": [owner]}},
        )  # fmt: skip
        with self._lock:
            times = self.times.get((meta["namespace"], meta["name"]))
            if times is not None:
                times.assigned, times.exporter = time.monotonic(), name


def _booked_ahead(lease: Obj) -> bool:
    """`reconcileStatusExporterRef` of 0.9.0's lease controller: a Lease whose requested
    `spec.beginTime` is after now gets no exporter (and no condition) until then."""
    begin = (lease.get("spec") or {}).get("beginTime")
    return isinstance(begin, str) and bool(begin) and _parse_time(begin) > datetime.now(UTC)


def requested_times(requested: Any) -> Obj:
    """The spec times CreateLease writes from a `client.v1.Lease` (`LeaseFromProtobuf`):
    begin and end give the duration, end and duration give the begin."""
    begin = requested.begin_time.ToDatetime(UTC) if requested.HasField("begin_time") else None
    end = requested.end_time.ToDatetime(UTC) if requested.HasField("end_time") else None
    seconds = requested.duration.seconds if requested.HasField("duration") else None
    if begin is not None and end is not None:
        seconds = int((end - begin).total_seconds())
    elif end is not None and seconds:
        begin = end - timedelta(seconds=seconds)
    times: Obj = {}
    if seconds is not None:
        times["duration"] = go_duration(seconds)
    for key, moment in (("beginTime", begin), ("endTime", end)):
        if moment is not None:
            times[key] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return times


def _holder(lease: Obj) -> str:
    """The exporter an active Lease holds, "" for none."""
    status = lease.get("status") or {}
    held: str = "" if status.get("ended") else (status.get("exporterRef") or {}).get("name", "")
    return held


def conditions(obj: Obj) -> list[Obj]:
    found: list[Obj] = (obj.get("status") or {}).get("conditions") or []
    return found
