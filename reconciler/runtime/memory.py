"""The memory of a namespaced install's pools: since when a pool has had a surplus, its
backoff and what it learned of its demand, kept in a coordination.k8s.io Lease beside its
ExporterSet.

A cluster-wide install writes this memory into annotations of the set (SURPLUS_SINCE,
BACKOFF). The Role that Jumpstarter's operator gives an exporter-set controller has no
update or patch on exportersets (only on their status, whose schema has no field for it),
but all verbs on coordination Leases in its namespace; a namespaced install of this
product is granted the same (`pool.model.access`). So there the memory is a Lease
named after the set (`lease_name`), owned by it (garbage collected with it), holding the
same annotation keys. It is named for the first thing it held, the cooldown's moment, and
keeps that name so an upgrade keeps a running cooldown. The set's own annotations are read
while no such Lease exists, and the Lease starts with what they hold, so a takeover from
Jumpstarter's controller keeps the cooldown that is running.

Each Lease is read once per set and process, then remembered; writes go to the apiserver
and the memory together, and only when a value changes (as the annotations' do).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from pool.model.access import MEMORY_LEASES
from pool.model.keys import BACKOFF, DEMAND, LEGACY_SURPLUS_SINCE, SURPLUS_SINCE
from reconciler.runtime.cache import meta_of
from reconciler.runtime.kube import ApiError, Kube

__all__ = ["MemoryLeases", "lease_name"]

Obj = dict[str, Any]
_PREFIX = "surplus-since."
_MAX_NAME = 253
_KEYS = (
    SURPLUS_SINCE,
    LEGACY_SURPLUS_SINCE,
    BACKOFF,
    DEMAND,
)  # the memory a set's annotations hold


def lease_name(set_name: str) -> str:
    """`surplus-since.<set>`, or with a digest of the set's name where that is too long."""
    name = _PREFIX + set_name
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(set_name.encode()).hexdigest()[:16]
    return f"{name[: _MAX_NAME - len(digest) - 1]}.{digest}"


class MemoryLeases:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        # set uid -> the annotations its Lease holds, None: no Lease; absent: not read yet
        self._known: dict[str, dict[str, str] | None] = {}
        self._lock = threading.Lock()

    def read(self, exporter_set: Obj) -> Mapping[str, str] | None:
        """The annotations of the set's Lease, None while it has none."""
        uid = str(meta_of(exporter_set).get("uid", ""))
        with self._lock:
            if uid in self._known:
                return self._known[uid]
        meta = meta_of(exporter_set)
        lease = self.kube.get(MEMORY_LEASES, meta.get("namespace", ""), lease_name(meta["name"]))
        held = None
        if lease is not None:
            annotations = meta_of(lease).get("annotations") or {}
            held = {str(k): v for k, v in annotations.items() if isinstance(v, str)}
        with self._lock:
            self._known[uid] = held
        return held

    def remember(self, exporter_set: Obj, marks: Mapping[str, str | None]) -> None:
        """Write these annotations (None: remove one) into the set's Lease, creating it
        if needed."""
        meta = meta_of(exporter_set)
        uid, namespace = str(meta.get("uid", "")), str(meta.get("namespace", ""))
        name = lease_name(meta["name"])
        held = self.read(exporter_set)
        if held is None:
            annotations = meta.get("annotations") or {}
            held = {k: annotations[k] for k in _KEYS if isinstance(annotations.get(k), str)}
            body = {
                "apiVersion": MEMORY_LEASES.api_version,
                "kind": MEMORY_LEASES.kind,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": _kept(held, marks),
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
                self.kube.create(MEMORY_LEASES, namespace, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                # Made by a predecessor after this process read it: written over, and read
                # afresh at the next pass.
                self.kube.patch(MEMORY_LEASES, namespace, name, _patch(marks))
                self.forget(uid)
                return
        else:
            self.kube.patch(MEMORY_LEASES, namespace, name, _patch(marks))
        with self._lock:
            self._known[uid] = _kept(held, marks)

    def forget(self, uid: str) -> None:
        """The set is gone (its Lease goes with it)."""
        with self._lock:
            self._known.pop(uid, None)


def _kept(held: Mapping[str, str], marks: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in {**held, **marks}.items() if v is not None}


def _patch(marks: Mapping[str, str | None]) -> Obj:
    return {"metadata": {"annotations": dict(marks)}}
