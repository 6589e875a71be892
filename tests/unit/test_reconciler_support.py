"""Builders of planner inputs shared by the reconciler tests (no tests here)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pool.model.views import ClassView, ExporterView, HookRecord, PoolView

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pool(**overrides: Any) -> PoolView:
    values: dict[str, Any] = {
        "name": "pool",
        "namespace": "ns",
        "generation": 1,
        "min_replicas": 0,
        "max_replicas": 10,
        "min_available": 2,
        "cooldown": timedelta(minutes=5),
        "recycle": "ExitAndReplace",
        "template_labels": {"board": "qemu"},
        "selector": {"matchLabels": {"board": "qemu"}},
    }
    values.update(overrides)
    return PoolView(**values)


def klass(binding: str = "Immediate", reclaim: str = "Delete") -> ClassView:
    return ClassView("qemu", binding, reclaim)


def ready(name: str, minute: int = 0, **overrides: Any) -> ExporterView:
    values: dict[str, Any] = {
        "name": name,
        "created": T0 + timedelta(minutes=minute),
        "registered": True,
        "online": True,
        "exporter_status": "Available",
    }
    values.update(overrides)
    return ExporterView(**values)


def booting(name: str, minute: int = 0, **overrides: Any) -> ExporterView:
    return ExporterView(name=name, created=T0 + timedelta(minutes=minute), **overrides)


def standby(name: str = "pool-s", minute: int = 0) -> ExporterView:
    """The pool's standby Exporter: enabled, credentialed, never online, no Pod."""
    return booting(name, minute, standby=True)


def owing(name: str) -> ExporterView:
    """Reports Available but its record owes the afterLease hook of lease `l1`."""
    return ready(
        name,
        records_lease_hooks=True,
        hooks=HookRecord("l1", "uid-1", before_phase="Succeeded", after_phase="Running"),
    )


class Held:
    """A cache for the executor (`reconciler.runtime.executor.Runtime`): the objects given,
    by name, in any namespace."""

    def __init__(self, objects: dict[str, dict[str, Any]] | None = None) -> None:
        self.objects = objects if objects is not None else {}

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(name)

    def observed_write(self, obj: dict[str, Any]) -> None:
        pass
