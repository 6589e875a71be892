"""The runtime side of the provisioner interface (`Provisioner.watches`, `cleanup`): a
provisioner's own resources are cached and indexed by set, their events wake the set
they are labelled with, a pass observes them by instance, and removing an instance
deletes what the provisioner's cleanup names. The provisioner here is written for the
test: each instance a VirtualMachine (KubeVirt's resource, not owned by the Exporter)
beside the Pod that runs its exporter. No apiserver: the caches are filled by hand and
the writes recorded (`RecordingKube`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from api.provisioners.check import ParameterCheck
from bench.reconciler import exporter, exporter_set, pod
from pool.model.access import (
    ACCESS,
    CLASSES,
    CONFIGMAPS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    PODS,
    Resource,
    allowed,
    provisioned_access,
)
from pool.model.actions import Remove
from pool.model.keys import FENCED_AT, FENCED_FOR, INSTANCE_LABEL, NAME_LABEL
from pool.model.timefmt import format_time
from pool.model.views import Observation, ProvisionedView
from pool.rendering.provisioners import PROVISIONERS, RECONCILER_ACCESS, provisioner
from pool.rendering.provisioners.base import Findings, Provisioner, Remote
from pool.rendering.render import Image, InstanceContext
from pool.rules.planner import plan
from reconciler.runtime.caches import build_caches
from reconciler.runtime.claims import Claims
from reconciler.runtime.controller import Controller
from reconciler.runtime.credentials import InstanceCredentials
from reconciler.runtime.executor import Executor, Pass, Runtime
from reconciler.runtime.expectations import Expectations
from reconciler.runtime.failures import StepFailed
from reconciler.runtime.kube import ApiError
from reconciler.runtime.observe import Observed, Observer
from reconciler.runtime.scope import Scope
from tests.unit.test_reconciler_observe import NoApi
from tests.unit.test_reconciler_step_failures import RecordingKube
from tests.unit.test_reconciler_support import T0, Held, klass, pool, ready

Obj = dict[str, Any]

NS, SET, OTHER = "lab", "pool", "other"
SET_UID = f"set-{NS}-{SET}"
NOW = T0 + timedelta(hours=12)
VIRTUAL_MACHINES = Resource("kubevirt.io", "v1", "virtualmachines", "VirtualMachine")


class VmProvisioner:
    """`vm.example.com`: each instance a VirtualMachine, labelled with its set and
    instance, beside the Pod that runs its exporter. The VirtualMachine has no
    ownerReference, so the removal of an instance deletes it (`cleanup`)."""

    name = "vm.example.com"
    default_images: Mapping[str, Image] = {"exporter": Image("registry.example/exporter:1")}
    watches: tuple[Resource, ...] = (VIRTUAL_MACHINES,)
    remote: Remote | None = None

    def check_parameters(
        self, parameters: Mapping[str, Any], *, merged: bool = False
    ) -> ParameterCheck:
        return ParameterCheck()

    def class_findings(self, class_spec: Mapping[str, Any]) -> Findings:
        return [], []

    def set_findings(
        self, set_spec: Mapping[str, Any], class_spec: Mapping[str, Any], merged: Mapping[str, Any]
    ) -> Findings:
        return [], []

    def drivers(self, ctx: InstanceContext) -> list[dict[str, Any]]:
        return [dict(d) for d in ctx.drivers]

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        meta = {"name": ctx.exporter, "namespace": ctx.namespace, "labels": ctx.pod_labels()}
        container = {"name": "exporter", "image": ctx.images["exporter"].image}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**meta, "ownerReferences": [ctx.owner_reference()]},
            "spec": {"containers": [container]},
        }

    def render_vm(self, ctx: InstanceContext) -> dict[str, Any]:
        """What its step would create for the instance (the labels are the contract)."""
        meta = {"name": ctx.exporter, "namespace": ctx.namespace}
        return {
            "apiVersion": VIRTUAL_MACHINES.api_version,
            "kind": VIRTUAL_MACHINES.kind,
            "metadata": {**meta, "labels": ctx.provisioned_labels()},
            "spec": {"runStrategy": "Halted"},
        }

    def cleanup(
        self, instance: str, provisioned: Sequence[ProvisionedView]
    ) -> tuple[ProvisionedView, ...]:
        return tuple(p for p in provisioned if p.resource == VIRTUAL_MACHINES)


VM: Provisioner = VmProvisioner()  # checked against the interface


def _vm(instance: str, set_name: str = SET) -> Obj:
    """The instance's VirtualMachine as the apiserver would hold it."""
    ctx = InstanceContext(
        NS, instance, f"uid-{NS}-{instance}", {}, set_name, {}, VM.default_images, ""
    )
    made = VmProvisioner().render_vm(ctx)
    made["metadata"]["uid"] = f"vm-{instance}"
    return made


def _class() -> Obj:
    return {"metadata": {"name": "qemu", "namespace": NS}, "spec": {"provisioner": VM.name}}


def test_its_watch_is_cached_and_indexed_by_set() -> None:
    caches = build_caches(NoApi(), Scope((NS,)), 60.0, 10.0, VM.watches)  # type: ignore[arg-type]
    machines = caches.watches[VIRTUAL_MACHINES]
    assert caches.provisioned == (VIRTUAL_MACHINES,)
    assert caches.informers[VIRTUAL_MACHINES] is machines  # started, synced, probed
    assert machines.streams == (NS,)  # the install's scope
    assert machines.label_selector == f"{NAME_LABEL},{INSTANCE_LABEL}"
    machines.apply("ADDED", _vm(f"{SET}-0"))
    machines.apply("ADDED", _vm(f"{OTHER}-0", OTHER))
    assert machines.derived_by_index("set", (NS, SET)) == [
        ProvisionedView(VIRTUAL_MACHINES, f"{SET}-0", f"{SET}-0", uid=f"vm-{SET}-0")
    ]
    assert machines.get(NS, f"{SET}-0") == {
        k: v for k, v in _vm(f"{SET}-0").items() if k != "spec"
    }  # metadata only
    qemu = build_caches(NoApi(), Scope((NS,)), 60.0, 10.0)  # type: ignore[arg-type]
    assert qemu.provisioned == () and VIRTUAL_MACHINES not in qemu.informers


def test_a_provisioner_watches_only_resources_of_its_own() -> None:
    with pytest.raises(ValueError, match="configmaps"):
        build_caches(NoApi(), Scope((NS,)), 60.0, 10.0, (CONFIGMAPS,))  # type: ignore[arg-type]


def test_an_event_of_such_an_object_wakes_exactly_the_labelled_set() -> None:
    controller = Controller(RecordingKube(), VM, namespace=NS)  # type: ignore[arg-type]
    machines = controller.watches[VIRTUAL_MACHINES]

    def woken() -> list[tuple[str, str]]:
        keys = []
        while (taken := controller.queue.take(timeout=0)) is not None:
            keys.append(taken[0])
            controller.queue.done(taken[0])
        return keys

    machines.apply("ADDED", _vm(f"{SET}-0"))
    assert woken() == [(NS, SET)]
    moved = _vm(f"{SET}-0", OTHER)  # relabelled: the set it left and the one it joined
    machines.apply("MODIFIED", moved)
    assert sorted(woken()) == [(NS, OTHER), (NS, SET)]
    machines.apply("DELETED", moved)
    assert woken() == [(NS, OTHER)]


def test_observe_puts_the_objects_into_the_observation_by_instance() -> None:
    caches = build_caches(NoApi(), Scope((NS,)), 60.0, 10.0, VM.watches)  # type: ignore[arg-type]
    claims = Claims(caches.watches[JUMPSTARTER_LEASES])
    observer = Observer(
        VM,
        caches.watches,
        claims,
        InstanceCredentials(caches.watches, caches.secrets),
        Expectations(),
        {},
        live=NoApi(),
    )
    the_set = exporter_set(NS, SET, warm=2)
    caches.watches[EXPORTERSETS].apply("ADDED", the_set)
    claims.update((NS, SET), the_set)
    caches.watches[CLASSES].apply("ADDED", _class())
    for index in range(2):
        made = exporter(NS, SET, SET_UID, index, "available")
        caches.watches[EXPORTERS].apply("ADDED", made)
        caches.watches[PODS].apply("ADDED", pod(NS, SET, made))
    machines = caches.watches[VIRTUAL_MACHINES]
    for name, set_name in ((f"{SET}-0", SET), (f"{SET}-1", SET), (f"{OTHER}-0", OTHER)):
        machines.apply("ADDED", _vm(name, set_name))
    observed = observer.observe(the_set)
    assert isinstance(observed, Observed), observed
    assert observed.observation.provisioned == {
        name: (ProvisionedView(VIRTUAL_MACHINES, name, name, uid=f"vm-{name}"),)
        for name in (f"{SET}-0", f"{SET}-1")
    }
    machines.apply("DELETED", _vm(f"{SET}-1"))
    observed = observer.observe(the_set)
    assert isinstance(observed, Observed)
    assert list(observed.observation.provisioned) == [f"{SET}-0"]


def test_the_plan_s_removal_carries_the_instance_s_objects() -> None:
    fenced = ready("pool-0", enabled=False, fenced=True)
    own = (ProvisionedView(VIRTUAL_MACHINES, "pool-0", "pool-0", uid="vm-0"),)
    seen = Observation(
        pool=pool(min_available=0),
        klass=klass(),
        exporters=(fenced,),
        provisioned={"pool-0": own, "pool-9": ()},
    )
    removals = [a for a in plan(seen, T0).actions if isinstance(a, Remove)]
    assert removals == [Remove("pool-0", fence=False)]
    assert removals[0].provisioned == own


def _executor(kube: RecordingKube, provisioner: Provisioner, name: str) -> Executor:
    exporter_obj = exporter(NS, SET, SET_UID, 0, "available")
    runtime = Runtime(
        kube,  # type: ignore[arg-type]
        provisioner,
        exporters=Held({name: exporter_obj}),  # type: ignore[arg-type]
        secrets=Held(),  # type: ignore[arg-type]
    )
    return Executor(runtime, Pass(exporter_set(NS, SET, 0), None, NOW))


def test_removing_an_instance_deletes_what_its_cleanup_names_before_the_exporter() -> None:
    name = f"{SET}-0"
    machine = ProvisionedView(VIRTUAL_MACHINES, name, name, uid="vm-0")
    going = ProvisionedView(VIRTUAL_MACHINES, f"{name}-old", name, deleting=True)
    removal = Remove(name, False, "surplus", provisioned=(machine, going))
    kube = RecordingKube()
    _executor(kube, VM, name).run([removal])
    deletes = [(resource, what) for verb, resource, what in kube.writes if verb == "delete"]
    # one already being deleted is not deleted again
    assert deletes == [("virtualmachines", name), ("exporters", name)]
    # one replaced since (the uid precondition fails) is left, and the removal goes on
    kube = RecordingKube()
    kube.refuse["virtualmachines"] = ApiError(409, "Conflict", "Precondition failed: UID")
    _executor(kube, VM, name).run([removal])
    assert [w for w in kube.writes if w[0] == "delete"] == [("delete", "exporters", name)]
    # a cleanup that fails otherwise keeps the Exporter for the next pass
    kube = RecordingKube()
    kube.refuse["virtualmachines"] = ApiError(403, "Forbidden", "no")
    with pytest.raises(StepFailed):
        _executor(kube, VM, name).run([removal])
    assert not [w for w in kube.writes if w[1] == "exporters"]


def test_a_pass_removes_an_instance_with_its_virtual_machine() -> None:
    kube = RecordingKube()
    controller = Controller(kube, VM, namespace=NS, clock=lambda: NOW)  # type: ignore[arg-type]
    watches = controller.watches
    watches[CLASSES].apply("ADDED", _class())
    watches[EXPORTERSETS].apply("ADDED", exporter_set(NS, SET, warm=0))
    made = exporter(NS, SET, SET_UID, 0, "available")
    made["metadata"]["annotations"] = {
        FENCED_AT: format_time(NOW - timedelta(hours=1)),
        FENCED_FOR: "ScaleDown: surplus",
    }
    made["spec"] = {"enabled": False}
    watches[EXPORTERS].apply("ADDED", made)
    watches[PODS].apply("ADDED", pod(NS, SET, made))
    watches[VIRTUAL_MACHINES].apply("ADDED", _vm(f"{SET}-0"))
    controller.sync((NS, SET))
    deletes = [(resource, name) for verb, resource, name in kube.writes if verb == "delete"]
    assert deletes == [("virtualmachines", f"{SET}-0"), ("exporters", f"{SET}-0")]


def test_the_access_table_grants_a_provisioner_s_resources_only_where_declared() -> None:
    granted = provisioned_access(VM.watches)
    for verb in ("get", "list", "watch", "delete"):
        assert allowed(VIRTUAL_MACHINES, verb, provisioned=granted)
        assert not allowed(VIRTUAL_MACHINES, verb)
    assert not allowed(VIRTUAL_MACHINES, "create", provisioned=granted)
    assert all(p.resource != "virtualmachines" for p in ACCESS)
    # the client of a running reconciler allows what its own provisioner declares
    kube = RecordingKube()
    Controller(kube, VM, namespace=NS)  # type: ignore[arg-type]
    assert kube.provisioned == granted  # type: ignore[attr-defined]
    qemu = RecordingKube()
    Controller(qemu, provisioner("qemu.jumpstarter.dev"), namespace=NS)  # type: ignore[arg-type]
    assert qemu.provisioned == ()  # type: ignore[attr-defined]


def test_qemu_watches_nothing_and_cleans_nothing_up() -> None:
    qemu = provisioner("qemu.jumpstarter.dev")
    assert qemu.watches == ()
    # KubeVirt's objects live on its target cluster, which the runtime does not watch
    assert list(PROVISIONERS) == [qemu.name, "kubevirt.jumpstarter.dev"]
    assert all(p.watches == () for p in PROVISIONERS.values())
    # so each reconciler's generated RBAC is the table's alone
    assert all(access == ACCESS for access in RECONCILER_ACCESS.values())
    machine = ProvisionedView(VIRTUAL_MACHINES, "pool-0", "pool-0")
    assert qemu.cleanup("pool-0", (machine,)) == ()
    kube = RecordingKube()
    removal = Remove(f"{SET}-0", False, "surplus", provisioned=(machine,))
    _executor(kube, qemu, f"{SET}-0").run([removal])
    assert [w for w in kube.writes if w[0] == "delete"] == [("delete", "exporters", f"{SET}-0")]
    assert replace(removal, provisioned=()) == removal  # not part of the step's identity
