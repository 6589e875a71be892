"""The cooldown memory of a namespaced install: since when a pool has had a surplus,
kept in a coordination.k8s.io Lease beside its ExporterSet.

A cluster-wide install writes the memory into the set's SURPLUS_SINCE annotation. The
Role that Jumpstarter's operator gives an exporter-set controller has no update or
patch on exportersets (only on their status, whose schema has no field for it), but all
verbs on coordination Leases in its namespace; a namespaced install of this product is
granted the same (`reconciler.access`). So there the memory is a Lease named after the
set (`lease_name`), owned by it (garbage collected with it), holding the moment in the
same annotation key. The set's own annotation is still read while no such Lease exists,
so a takeover from Jumpstarter's controller keeps the cooldown that is running.

Each Lease is read once per set and process, then remembered; writes go to the apiserver
and the memory together, and only when the moment changes (as the annotation's do).
"""

from __future__ import annotations

import hashlib
import threading
from datetime import datetime
from typing import Any

from reconciler.access import SURPLUS_LEASES
from reconciler.keys import SURPLUS_SINCE
from reconciler.kube import ApiError, Kube
from reconciler.timefmt import format_time, parse_time

__all__ = ["SurplusLeases", "lease_name"]

Obj = dict[str, Any]
_PREFIX = "surplus-since."
_MAX_NAME = 253


def lease_name(set_name: str) -> str:
    """`surplus-since.<set>`, or with a digest of the set's name where that is too long."""
    name = _PREFIX + set_name
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(set_name.encode()).hexdigest()[:16]
    return f"{name[: _MAX_NAME - len(digest) - 1]}.{digest}"


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class SurplusLeases:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        # set uid -> the moment the Lease holds (None: no surplus); absent: not read yet
        self._known: dict[str, datetime | None] = {}
        self._exists: set[str] = set()
        self._lock = threading.Lock()

    def since(self, exporter_set: Obj) -> tuple[bool, datetime | None]:
        """(whether the set has a Lease of ours, the moment it holds)."""
        uid = str(_meta(exporter_set).get("uid", ""))
        with self._lock:
            if uid in self._known:
                return uid in self._exists, self._known[uid]
        meta = _meta(exporter_set)
        lease = self.kube.get(SURPLUS_LEASES, meta.get("namespace", ""), lease_name(meta["name"]))
        value = None
        if lease is not None:
            raw = (_meta(lease).get("annotations") or {}).get(SURPLUS_SINCE)
            try:
                value = parse_time(raw) if isinstance(raw, str) and raw else None
            except ValueError:
                value = None
        with self._lock:
            self._known[uid] = value
            if lease is not None:
                self._exists.add(uid)
        return lease is not None, value

    def remember(self, exporter_set: Obj, since: datetime | None) -> None:
        """Write the moment (None: forget it) into the set's Lease, creating it if needed."""
        meta = _meta(exporter_set)
        uid, namespace = str(meta.get("uid", "")), str(meta.get("namespace", ""))
        name = lease_name(meta["name"])
        value = format_time(since) if since is not None else None
        exists, _ = self.since(exporter_set)
        if not exists:
            body = {
                "apiVersion": SURPLUS_LEASES.api_version,
                "kind": SURPLUS_LEASES.kind,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {SURPLUS_SINCE: value} if value else {},
                    "ownerReferences": [
                        {
                            "apiVersion": exporter_set.get("apiVersion", ""),
                            "kind": exporter_set.get("kind", "ExporterSet"),
                            "name": meta["name"],
                            "uid": uid,
                        }
                    ],
                },
                "spec": {},
            }
            try:
                self.kube.create(SURPLUS_LEASES, namespace, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                exists = True  # made by a predecessor after this process read it
        if exists:
            patch: Obj = {"metadata": {"annotations": {SURPLUS_SINCE: value}}}
            self.kube.patch(SURPLUS_LEASES, namespace, name, patch)
        with self._lock:
            self._known[uid] = since
            self._exists.add(uid)

    def forget(self, uid: str) -> None:
        """The set is gone (its Lease goes with it)."""
        with self._lock:
            self._known.pop(uid, None)
            self._exists.discard(uid)
