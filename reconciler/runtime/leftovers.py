"""The instances a set leaves behind: lease protection of those it no longer controls.

An Exporter labelled for a set that does not control it any more (the set was deleted,
is being deleted, or was made again under the same name) keeps its lease protection
(`pool.rules.protection`) until no lease holds it, or until the bound. While a deleted
one is held an Event says once that it stays, and the set's key is requeued for the
bound. A pool's Exporter deleted while leased before the pool could protect it gets an
Event too: its deletion is noted as it is seen (`note_if_lost`), and said at the set's
next pass.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from pool.model.access import EVENTS, EXPORTERS
from pool.model.adapt import controller_of, exporter_view
from pool.model.keys import LEASE_PROTECTION, SET_LABEL
from pool.model.reasons import INSTANCE_KEPT, INSTANCE_LOST, INSTANCE_RELEASED
from pool.rules.protection import busy_lease, leased_names, verdict
from reconciler.runtime.cache import Informer, ObjKey, key_of, meta_of
from reconciler.runtime.claims import Claims
from reconciler.runtime.events import build_event
from reconciler.runtime.kube import ApiError, Kube, NotLeading
from reconciler.runtime.workqueue import WorkQueue
from reconciler.runtime.writer import without_protection

__all__ = ["Leftovers"]

log = logging.getLogger("reconciler.controller")  # stable: log filters select by it

Obj = dict[str, Any]


class Leftovers:
    def __init__(
        self,
        kube: Kube,
        sets: Informer,
        exporters: Informer,
        claims: Claims,
        queue: WorkQueue[ObjKey],
    ) -> None:
        self.kube, self.sets, self.exporters = kube, sets, exporters
        self.claims, self.queue = claims, queue
        # The uids whose stay was announced, and per set the instances deleted while
        # leased before they were protected, with the lease, for an Event each.
        self._announced: set[str] = set()
        self._lost: dict[ObjKey, list[tuple[Obj, str]]] = {}
        self._lock = threading.Lock()
        self.writes = 0  # the API writes made

    def note_if_lost(self, exporter: Obj) -> None:
        """A pool's Exporter deleted while a lease held it, without the protection (it
        was deleted before the pool could add it): an Event will say so."""
        meta = meta_of(exporter)
        set_name = (meta.get("labels") or {}).get(SET_LABEL)
        if not set_name or LEASE_PROTECTION in (meta.get("finalizers") or ()):
            return
        namespace, name = key_of(exporter)
        lease = ((exporter.get("status") or {}).get("leaseRef") or {}).get("name") or next(
            (v.name for v in self.claims.leases_naming(namespace, name) if not v.ended), ""
        )
        if lease:
            with self._lock:
                self._lost.setdefault((namespace, set_name), []).append(
                    (exporter, f"lease {lease}")
                )

    def look_after(self, key: ObjKey, now: datetime) -> Obj | None:
        """Look after what the set `key` left (`_tend`); the set as cached (None: it is
        gone), for the rest of the pass."""
        exporter_set = self.sets.get(*key)
        self._tend(key, exporter_set, now)
        return exporter_set

    def _tend(self, key: ObjKey, exporter_set: Obj | None, now: datetime) -> None:
        """Release, keep or announce the leftovers labelled for the set `key` (None: it is
        gone), and say which lost instances were deleted while leased."""
        namespace = key[0]
        with self._lock:
            lost = self._lost.pop(key, [])
        live = None if exporter_set is None else meta_of(exporter_set)
        owner = "" if live is None or live.get("deletionTimestamp") else live.get("uid", "")
        leftovers = [
            obj
            for obj in self.exporters.by_index("set", key)
            if LEASE_PROTECTION in (meta_of(obj).get("finalizers") or ())
            and (not owner or controller_of(obj) != owner)
        ]
        if not leftovers and not lost:
            return
        leased_by = leased_names(
            view
            for obj in leftovers
            for view in self.claims.leases_naming(namespace, key_of(obj)[1])
        )
        for exporter, lease in lost:
            note = (
                f"Exporter {meta_of(exporter).get('name')} was deleted while {lease} held it, "
                "before the pool protected it"
            )
            self._event(exporter, INSTANCE_LOST, "Delete", note, now, warning=True)
        soonest: datetime | None = None
        for obj in leftovers:
            view = exporter_view(obj)
            found = verdict(view, leased_by, busy_lease(view, leased_by), now)
            name, uid = view.name, view.uid
            if found.release:
                try:
                    self.kube.patch(EXPORTERS, namespace, name, without_protection(obj))
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise
                    continue  # gone, or changed: its event brings the set back
                self.writes += 1
                self._announced.discard(uid)
                note = f"released Exporter {name} of ExporterSet {key[1]}: {found.why}"
                log.info("%s/%s: %s", *key, note)
                self._event(obj, INSTANCE_RELEASED, "Release", note, now, found.warning)
            elif found.until is not None:  # deleted, held for its lease: say so once
                if uid not in self._announced:
                    self._announced.add(uid)
                    note = f"Exporter {name} of ExporterSet {key[1]} is being deleted: {found.why}"
                    log.info("%s/%s: %s", *key, note)
                    self._event(obj, INSTANCE_KEPT, "Keep", note, now, warning=False)
                if soonest is None or found.until < soonest:
                    soonest = found.until
        if soonest is not None:
            self.queue.add_after(key, max(0.0, (soonest - now).total_seconds()) + 0.5)

    def _event(
        self, regarding: Obj, reason: str, action: str, note: str, now: datetime, warning: bool
    ) -> None:
        """Best effort, as every Event: about an Exporter whose set may be gone."""
        event = build_event(
            {**regarding, "apiVersion": EXPORTERS.api_version, "kind": EXPORTERS.kind},
            reason=reason,
            action=action,
            note=note,
            now=now,
            warning=warning,
        )
        namespace = meta_of(regarding).get("namespace", "")
        try:
            self.kube.create(EVENTS, namespace, event)
            self.writes += 1
        except NotLeading:
            raise
        except Exception as exc:  # an event must never fail a reconcile
            log.warning("%s: event %s not written: %s", namespace, reason, exc)
