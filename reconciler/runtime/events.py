"""Kubernetes Events about a pool, so `kubectl describe exporterset` tells what the
reconciler did to it and why.

Building an event is pure; emitting one is best effort: a pool is never left half-done
because its event could not be written.

They are core v1 Events, as controller-runtime's recorder writes them, so the Role that
Jumpstarter's operator gives an exporter-set controller (events in the core group)
allows them. With `eventTime` and the reporting fields set, the apiserver serves them as
`events.k8s.io/v1` too (`involvedObject` as `regarding`, `message` as `note`).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any

__all__ = ["REPORTING_CONTROLLER", "build_event"]

REPORTING_CONTROLLER = "virtualtarget.jumpstarter.dev/reconciler"
# The Pod name in a cluster (set by the Deployment), else the host.
_REPORTING_INSTANCE = os.environ.get("POD_NAME") or socket.gethostname()


def _reference(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "namespace": metadata.get("namespace", ""),
        "name": metadata.get("name", ""),
        "uid": metadata.get("uid", ""),
    }


def build_event(
    regarding: dict[str, Any],
    *,
    reason: str,
    action: str,
    note: str,
    now: datetime,
    related: dict[str, Any] | None = None,
    warning: bool = False,
) -> dict[str, Any]:
    """A core v1 Event about `regarding` (the ExporterSet)."""
    reference = _reference(regarding)
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{reference['name']}-", "namespace": reference["namespace"]},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": _REPORTING_INSTANCE,
        "action": action,
        "reason": reason,
        "involvedObject": reference,
        "message": note[:1024],  # the API refuses longer notes
        "type": "Warning" if warning else "Normal",
    }
    if related is not None:
        event["related"] = _reference(related)
    return event
