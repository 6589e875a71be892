"""Lease protection: a busy instance carries the finalizer, deleting it (or its set) leaves
it serving until its lease ends or the bound runs out, and every release of a deleted
instance, or an instance lost before it was protected, is an Event."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from pool.model.access import EXPORTERS, EXPORTERSETS, JUMPSTARTER_LEASES, Resource
from pool.model.actions import Protect, Remove, Retain, Unprotect
from pool.model.keys import FENCED_AT, FENCED_FOR, LEASE_PROTECTION
from pool.model.reasons import SCALE_DOWN
from pool.model.timefmt import format_time
from pool.rendering.provisioners import provisioner
from pool.rules.protection import PROTECTION_BOUND, Verdict, verdict
from reconciler.runtime.controller import Controller
from reconciler.runtime.executor import Executor, Pass, Runtime
from reconciler.runtime.kube import ApiError
from tests.unit.test_reconciler_planner import of, run
from tests.unit.test_reconciler_step_failures import (
    INSTANCE,
    NOW,
    NS,
    SET,
    RecordingKube,
    _exporter,
    make_lab,
)
from tests.unit.test_reconciler_support import T0, Held, klass, ready, standby

Obj = dict[str, Any]


def test_the_verdict_follows_the_lease_and_the_bound() -> None:
    nothing = Verdict()
    idle = ready("p-1")
    leased = ready("p-1", lease_ref="l1")
    assert verdict(idle, (), "", T0) == nothing
    assert verdict(leased, (), "lease l1", T0).protect
    assert verdict(ready("p-1"), {"p-1"}, "lease l1", T0).protect  # a Lease names it
    protected = replace(leased, protected=True)
    assert verdict(protected, (), "lease l1", T0) == nothing
    assert verdict(replace(idle, protected=True), (), "", T0).release
    deleted = replace(protected, deleting=True, deleted_at=T0)
    held = verdict(deleted, (), "lease l1", T0 + timedelta(hours=1))
    assert not held.release and held.until == T0 + PROTECTION_BOUND
    assert held.why == f"kept until lease l1 ends, at most until {format_time(held.until)}"
    late = verdict(deleted, (), "lease l1", T0 + PROTECTION_BOUND)
    assert late.release and late.warning
    # Being deleted before it was protected: nothing can be added any more.
    assert verdict(replace(leased, deleting=True, deleted_at=T0), (), "lease l1", T0) == nothing


def test_the_planner_protects_busy_instances_and_releases_them_after_the_lease() -> None:
    busy = ready("pool-0", lease_ref="l1")
    assert of(run([busy], min_available=0, recycle="InPlaceReuse"), Protect) == [Protect("pool-0")]
    back = ready("pool-0", protected=True)  # InPlaceReuse: back in the pool
    assert of(run([back], min_available=1, recycle="InPlaceReuse"), Unprotect) == [
        Unprotect("pool-0")
    ]
    # Leaving the pool: the fence (or the detach) takes the finalizer off in its write.
    served = ready("pool-0", protected=True, served_lease="l1")
    result = run([served, standby()], min_available=0)
    assert of(result, Remove) and not of(result, Unprotect)
    retained = run([served, standby()], min_available=0, klass=klass(reclaim="Retain"))
    assert of(retained, Retain) and not of(retained, Unprotect)


def test_a_deleted_leased_instance_is_held_until_its_lease_ends() -> None:
    deleted = ready(
        "pool-0", lease_ref="l1", protected=True, deleting=True, deleted_at=T0 - timedelta(hours=1)
    )
    result = run([deleted], min_available=0)
    assert not of(result, Unprotect)
    until = format_time(T0 - timedelta(hours=1) + PROTECTION_BOUND)
    assert [w.reason for w in result.waits] == [
        f"pool-0 is being deleted; kept until lease l1 ends, at most until {until}"
    ]
    assert result.requeue_after == timedelta(hours=23)
    ended = run([replace(deleted, lease_ref="")], min_available=0)
    assert of(ended, Unprotect) == [Unprotect("pool-0")]


class LiveKube(RecordingKube):
    """Answers the executor's live reads: the Exporters and Leases given."""

    def __init__(self, exporters: list[Obj], leases: list[Obj] | None = None) -> None:
        super().__init__()
        self.exporters = {e["metadata"]["name"]: e for e in exporters}
        self.leases = leases or []
        self.patches: list[tuple[str, Obj]] = []

    def get(self, resource: Resource, ns: str, name: str) -> Obj | None:
        return self.exporters.get(name) if resource is EXPORTERS else None

    def list(self, resource: Resource, ns: str | None = None, selector: str | None = None) -> Any:
        return (self.leases if resource is JUMPSTARTER_LEASES else []), "1"

    def patch(self, resource: Resource, ns: str, name: str, body: Obj, sub: str = "") -> Obj:
        self.patches.append((name, body))
        return super().patch(resource, ns, name, body, sub)


class LateLeaseKube(LiveKube):
    """A lease controller that chose the instance from what it read before the fence:
    its assignment lands `lag` seconds after the fence is written."""

    def __init__(self, exporters: list[Obj], lag: float) -> None:
        super().__init__(exporters)
        self.lag = lag

    def patch(self, resource: Resource, ns: str, name: str, body: Obj, sub: str = "") -> Obj:
        if (body.get("spec") or {}).get("enabled") is False:
            assigned = {"metadata": {"name": "late"}, "status": {"exporterRef": {"name": name}}}
            threading.Timer(self.lag, self.leases.append, (assigned,)).start()
        return super().patch(resource, ns, name, body, sub)


def _protected(name: str = INSTANCE, **meta: Any) -> Obj:
    exporter = _exporter(name)
    exporter["metadata"].update(finalizers=["keep.example/x", LEASE_PROTECTION], **meta)
    return exporter


def _executor(kube: LiveKube) -> Executor:
    exporter_set = {"metadata": {"name": SET, "namespace": NS, "uid": "set-uid"}}
    runtime = Runtime(
        kube,  # type: ignore[arg-type]
        provisioner("qemu.jumpstarter.dev"),
        exporters=Held(kube.exporters),  # type: ignore[arg-type]
        secrets=Held(),  # type: ignore[arg-type]
    )
    return Executor(runtime, Pass(exporter_set, None, NOW))


@pytest.mark.parametrize("fence", [True, False])
def test_a_removal_takes_the_protection_off_in_its_conditional_write(fence: bool) -> None:
    kube = LiveKube([_protected()])
    _executor(kube).run([Remove(INSTANCE, fence)])
    name, first = kube.patches[0]
    assert name == INSTANCE
    assert first["metadata"]["finalizers"] == ["keep.example/x"]
    assert first["metadata"]["resourceVersion"] == "3"
    # The fence is its pass's whole part; the delete is a later pass's.
    assert (("delete", "exporters", INSTANCE) in kube.writes) is not fence


def test_a_fence_says_what_it_was_for_and_deletes_nothing() -> None:
    kube = LiveKube([_exporter(INSTANCE)])
    _executor(kube).run([Remove(INSTANCE, True, "surplus since T, cooldown 5m", event=SCALE_DOWN)])
    ((name, fence),) = kube.patches
    assert name == INSTANCE and fence["spec"] == {"enabled": False}
    assert fence["metadata"]["annotations"] == {
        FENCED_AT: format_time(NOW),
        FENCED_FOR: "ScaleDown: surplus since T, cooldown 5m",
    }
    assert not [w for w in kube.writes if w[0] == "delete"] and not kube.events


def test_retain_detaches_without_the_protection() -> None:
    kube = LiveKube([_protected()])
    _executor(kube).run([Retain(INSTANCE)])
    detach = kube.patches[-1][1]["metadata"]
    assert detach["finalizers"] == ["keep.example/x"] and detach["ownerReferences"] == []


def test_protect_keeps_the_other_finalizers_and_marks_the_lease() -> None:
    exporter = _exporter(INSTANCE)
    exporter["metadata"]["finalizers"] = ["keep.example/x"]
    kube = LiveKube([exporter])
    _executor(kube).run([Protect(INSTANCE, "serves lease l1", served="l1")])
    [(_, patch)] = kube.patches
    assert patch["metadata"]["finalizers"] == ["keep.example/x", LEASE_PROTECTION]
    assert patch["metadata"]["annotations"] == {"virtualtarget.jumpstarter.dev/served-lease": "l1"}


class ChangedKube(LiveKube):
    """The Exporter changed since the plan: every conditional write is answered 409."""

    def patch(self, resource: Resource, ns: str, name: str, body: Obj, sub: str = "") -> Obj:
        raise ApiError(409, "Conflict", "the object has been modified")


def test_a_step_whose_conditional_write_finds_the_exporter_changed_is_not_done() -> None:
    """The pass after a write may plan from a cache that has not shown it: its repeat is
    refused (409), is not logged as carried out, and the next pass plans again."""
    protect = Protect(INSTANCE, "serves lease l1")
    unprotect = Unprotect(INSTANCE, "lease ended", False)
    for action, exporter in ((protect, _exporter(INSTANCE)), (unprotect, _protected())):
        refused = _executor(ChangedKube([exporter]))
        refused.run([action])
        assert refused.done == []
        accepted = _executor(LiveKube([exporter]))
        accepted.run([action])
        assert accepted.done == [action]
    removed = _executor(ChangedKube([_protected()]))
    removed.run([Remove(INSTANCE, True), Remove(INSTANCE, False)])
    assert removed.done == []


@pytest.fixture
def lab() -> tuple[Controller, RecordingKube]:
    return make_lab()


def _gone(controller: Controller) -> None:
    sets = controller.informers[EXPORTERSETS]
    current = sets.get(NS, SET)
    assert current is not None
    sets.apply("DELETED", current)


def _events(kube: RecordingKube) -> list[tuple[str, str, str]]:
    return [(e["reason"], e["type"], e["involvedObject"]["name"]) for e in kube.events]


def test_the_instances_of_a_deleted_set_are_held_for_their_lease_and_then_released(
    lab: tuple[Controller, RecordingKube],
) -> None:
    controller, kube = lab
    exporters = controller.informers[EXPORTERS]
    deleted = format_time(NOW - timedelta(minutes=5))
    held = _protected(deletionTimestamp=deleted)
    held["status"]["leaseRef"] = {"name": "lease-1"}
    exporters.apply("MODIFIED", held)
    _gone(controller)
    for _ in range(2):  # announced once
        assert controller.sync((NS, SET)) is None
    assert _events(kube) == [("InstanceKept", "Normal", INSTANCE)]
    note = kube.events[0]["message"]
    assert note.startswith(f"Exporter {INSTANCE} of ExporterSet {SET} is being deleted: kept")
    assert not [w for w in kube.writes if w[0] == "patch"]
    # The lease ends: the protection comes off and an Event says why it goes.
    del held["status"]["leaseRef"]
    exporters.apply("MODIFIED", held)
    controller.sync((NS, SET))
    assert ("patch", "exporters", INSTANCE) in kube.writes
    assert _events(kube)[-1] == ("InstanceReleased", "Normal", INSTANCE)
    assert kube.events[-1]["message"].endswith("no lease holds it any more")


def test_the_bound_releases_a_deleted_instance_with_a_warning(
    lab: tuple[Controller, RecordingKube],
) -> None:
    controller, kube = lab
    held = _protected(deletionTimestamp=format_time(NOW - PROTECTION_BOUND))
    held["status"]["leaseRef"] = {"name": "lease-1"}
    controller.informers[EXPORTERS].apply("MODIFIED", held)
    _gone(controller)
    controller.sync((NS, SET))
    assert _events(kube) == [("InstanceReleased", "Warning", INSTANCE)]
    assert "lease lease-1 still holds it" in kube.events[0]["message"]


def test_an_instance_deleted_while_leased_before_its_protection_gets_an_event(
    lab: tuple[Controller, RecordingKube],
) -> None:
    controller, kube = lab
    exporters = controller.informers[EXPORTERS]
    controller.informers[JUMPSTARTER_LEASES].apply(
        "ADDED",
        {
            "metadata": {"name": "lease-1", "namespace": NS},
            "spec": {"selector": {}},
            "status": {"exporterRef": {"name": INSTANCE}},
        },
    )
    current = exporters.get(NS, INSTANCE)
    assert current is not None
    _gone(controller)
    exporters.apply("DELETED", current)
    controller.sync((NS, SET))
    assert _events(kube) == [("InstanceLost", "Warning", INSTANCE)]
    assert "while lease lease-1 held it" in kube.events[0]["message"]
