"""What every write of a pass goes through: the runtime's dependencies, what the pass is
about, and the writes' shared discipline.

`Runtime` is what a runtime holds for all its passes (the client, the provisioner, the
caches it reads, expectations, the config Secret tracker, the pools' memory, the Event
sender), as controller-runtime groups one cluster's dependencies in one object; `Pass`
is what one pass is about (the set, its class, `now`, its instances' credentials as the
pass observed them). A `Writer` counts the API writes it makes (which the benchmarks and
tests read), writes a pool's Events best effort, and patches an Exporter only if it is
still what the plan saw. The steps build on it: `reconciler.runtime.executor` (creates,
memory, status), `reconciler.runtime.removal` (fences, deletes, detaches, lease
protection), `reconciler.runtime.configwrites` (instances' config Secrets).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pool.model.access import EVENTS, EXPORTERS
from pool.model.keys import LEASE_PROTECTION
from pool.rendering.configsync import ConfigSync
from pool.rendering.provisioners.base import Provisioner
from pool.rendering.render import Credentials
from reconciler.runtime.cache import Cache
from reconciler.runtime.events import build_event
from reconciler.runtime.eventsender import EventSender
from reconciler.runtime.expectations import Expectations
from reconciler.runtime.failures import RenderError
from reconciler.runtime.kube import ApiError, Kube, NotLeading
from reconciler.runtime.memory import MemoryLeases
from reconciler.runtime.targets import Targets

__all__ = [
    "Pass",
    "Runtime",
    "Writer",
    "because",
    "finalizers",
    "render_or_fail",
    "versioned",
    "without_protection",
]

log = logging.getLogger("reconciler.executor")  # stable: log filters select by it

Obj = dict[str, Any]


@dataclass(frozen=True)
class Runtime:
    """What a runtime holds for all its passes: the API client, the provisioner, the
    caches' readers, the writes the caches have not shown yet, each instance's last
    config rendering, and (in a namespaced install) the pools' memory Leases."""

    kube: Kube
    provisioner: Provisioner
    exporters: Cache  # the cached Exporters
    secrets: Cache  # the cached Secrets; told the answer of each config Secret write
    expectations: Expectations = field(default_factory=Expectations)
    configs: ConfigSync = field(default_factory=ConfigSync)
    # a namespaced install's pool memory (`reconciler.runtime.memory`); else the set's annotations
    memory: MemoryLeases | None = None
    # sends Events beside the passes once started (`reconciler.runtime.eventsender`); until
    # then, or without one, a pass writes its own
    events: EventSender | None = None
    # the target clusters of a provisioner whose instances live there too (`remote`)
    targets: Targets | None = None


@dataclass(frozen=True)
class Pass:
    """What one pass is about: the set, its class, its `now`, and the credentials of its
    instances as the pass found them (by Exporter name: the credentials, or why there
    are none yet), worked out by the controller, not by the steps."""

    exporter_set: Obj
    klass: Obj | None
    now: datetime
    credentials: Mapping[str, Credentials | str] = field(default_factory=dict)


@dataclass
class Writer:
    """The writes of one pass: counted, Events best effort, patches conditional."""

    runtime: Runtime
    this: Pass
    writes: int = 0

    @property
    def kube(self) -> Kube:
        return self.runtime.kube

    @property
    def namespace(self) -> str:
        return str(self.this.exporter_set["metadata"]["namespace"])

    @property
    def _name(self) -> str:
        return str(self.this.exporter_set["metadata"]["name"])

    @property
    def _key(self) -> tuple[str, str]:
        return self.namespace, self._name

    @property
    def _set_uid(self) -> str:
        return str(self.this.exporter_set["metadata"].get("uid", ""))

    def _cached_exporter(self, name: str) -> Obj | None:
        return self.runtime.exporters.get(self.namespace, name)

    def _cached_secret(self, name: str) -> Obj | None:
        return self.runtime.secrets.get(self.namespace, name)

    def _write(self, call: Callable[[], Any]) -> Any:
        self.writes += 1
        return call()

    def _event(
        self, reason: str, action: str, note: str, related: Obj | None, warning: bool = False
    ) -> None:
        """Best effort: a pool's step is done whether or not its Event could be written."""
        event = build_event(
            self.this.exporter_set,
            reason=reason,
            action=action,
            note=note,
            now=self.this.now,
            related=related or None,
            warning=warning,
        )
        events = self.runtime.events
        if events is not None and events.running:
            self.writes += 1
            events.send(self.namespace, event)
            return
        try:
            self._write(lambda: self.kube.create(EVENTS, self.namespace, event))
        except Exception as exc:  # an event must never fail a reconcile
            log.warning("%s/%s: event %s not written: %s", self.namespace, self._name, reason, exc)

    def _patch_if_unchanged(self, name: str, patch: Obj) -> bool:
        """A patch conditional on the resourceVersion it carries; False when the Exporter
        is gone or changed since the plan (the next pass plans again)."""
        try:
            self._write(lambda: self.kube.patch(EXPORTERS, self.namespace, name, patch))
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True


def finalizers(obj: Obj) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def versioned(obj: Obj) -> Obj:
    """The start of a merge patch conditional on the resourceVersion `obj` was seen at."""
    return {"metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}}


def without_protection(exporter: Obj) -> Obj:
    """A merge patch taking LEASE_PROTECTION off the Exporter, conditional on the
    resourceVersion it was seen at (a merge patch replaces the whole list)."""
    patch = versioned(exporter)
    patch["metadata"]["finalizers"] = [f for f in finalizers(exporter) if f != LEASE_PROTECTION]
    return patch


def render_or_fail(render: Callable[..., Any], *args: Any) -> Any:
    """Whatever rendering raises becomes RenderError (a failure the status reports)."""
    try:
        return render(*args)
    except NotLeading:
        raise
    except Exception as exc:
        raise RenderError(str(exc)) from exc


def because(done: str, why: str) -> str:
    return f"{done}: {why}" if why else done
