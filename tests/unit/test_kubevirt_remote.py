"""A KubeVirt instance's target-cluster part: where the target is, what is created there
and how, when a VirtualMachine there has failed, and what the planner makes of an
instance whose VM failed or is gone (a failed Pod's fate: replaced, never while leased)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from api.provisioners.kubevirt import KubevirtParameters
from pool.model.actions import PatchStatus, RememberBackoff, Remove
from pool.model.keys import INSTANCE_LABEL, NAME_LABEL, RETAINED_FROM, SET_NAMESPACE_LABEL
from pool.model.remote import FAILED_EXIT, remote_failure, with_remote_failures
from pool.model.views import ExporterView, Observation, PodView, ProvisionedView
from pool.rendering.provisioners import kubevirt as kv
from pool.rendering.provisioners import kubevirt_target as target
from pool.rendering.provisioners.base import TargetRef, target_of
from pool.rendering.render import InstanceContext
from pool.rules.planner import plan
from reconciler.runtime.routing import pool_keys
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready

Obj = dict[str, Any]
REMOTE = kv.KubevirtRemote()
VM = target.VIRTUAL_MACHINES
PARAMETERS = {"namespace": "vms", "image": "localhost/disk:1", "sshAccess": "NodePort"}
OURS = {SET_NAMESPACE_LABEL: "lab", NAME_LABEL: "pool", INSTANCE_LABEL: "pool-abc"}


def _ctx() -> InstanceContext:
    return InstanceContext(
        namespace="lab",
        exporter="pool-abc",
        exporter_uid="uid-1",
        labels={"board": "vm"},
        set_name="pool",
        parameters=PARAMETERS,
        images=kv.DEFAULT_IMAGES,
        recycle="ExitAndReplace",
        credentials_secret="kubevirt-credentials",
    )


def _vm(status: Obj) -> Obj:
    return {
        "kind": "VirtualMachine",
        "metadata": {"name": "x", "namespace": "vms"},
        "status": status,
    }


def test_the_target_is_the_classs_secret_and_the_merged_namespace() -> None:
    klass_obj = {"spec": {"credentialsSecretRef": {"name": "creds"}, "parameters": PARAMETERS}}
    exporter_set = {"spec": {"parameters": {"namespace": "other"}}}
    assert target_of(REMOTE, exporter_set, klass_obj) == TargetRef("creds", "kubeconfig", "other")
    assert target_of(REMOTE, exporter_set, None) is None
    assert target_of(REMOTE, exporter_set, {"spec": {"parameters": PARAMETERS}}) is None


def test_the_vm_comes_first_and_its_services_once_its_uid_is_known() -> None:
    (vm,) = REMOTE.objects(_ctx(), OURS)
    assert vm == {
        **target.render_virtual_machine("pool-abc", KubevirtParameters.model_validate(PARAMETERS)),
        "metadata": {
            "name": "pool-abc",
            "namespace": "vms",
            "labels": {**target.target_labels("pool-abc"), **OURS},
        },
    }
    (ssh,) = REMOTE.objects(_ctx(), OURS, owner_uid="vm-uid")
    assert ssh["metadata"]["name"] == "pool-abc-ssh"
    assert ssh["metadata"]["ownerReferences"][0]["uid"] == "vm-uid"
    assert ssh["metadata"]["labels"] == {**target.target_labels("pool-abc"), **OURS}


@pytest.mark.parametrize("status", sorted(target.FAILED_STATUSES))
def test_a_vm_in_a_failed_status_has_failed(status: str) -> None:
    assert REMOTE.failure(_vm({"printableStatus": status})) == f"VirtualMachine vms/x is {status}"


@pytest.mark.parametrize(
    "status", ["", "Stopped", "Provisioning", "Starting", "Running", "Stopping", "Terminating"]
)
def test_a_vm_a_lease_drives_or_the_target_is_readying_has_not(status: str) -> None:
    assert REMOTE.failure(_vm({"printableStatus": status})) == ""


def test_a_failure_quotes_kubevirts_failure_condition() -> None:
    failed = _vm(
        {
            "printableStatus": "ErrImagePull",
            "conditions": [
                {"type": "Ready", "status": "False", "message": "not this"},
                {"type": "Failure", "status": "True", "message": "image not found"},
            ],
        }
    )
    assert REMOTE.failure(failed) == "VirtualMachine vms/x is ErrImagePull: image not found"
    assert REMOTE.failure({"kind": "Service", "status": {"printableStatus": "ErrImagePull"}}) == ""


def _view(instance: str, failure: str = "") -> ProvisionedView:
    return ProvisionedView(VM, instance, instance, "vm-uid", target="lab/creds", failure=failure)


def _pod(name: str, **kw: Any) -> PodView:
    return replace(PodView(name, name, "Running", f"uid-{name}", f"pod-{name}", created=T0), **kw)


def test_a_failed_or_missing_vm_makes_its_pods_failed_only_where_the_target_was_read() -> None:
    assert remote_failure("a", (_view("a"),), VM, watched=True) == ""
    assert remote_failure("a", (_view("a", "VirtualMachine vms/a is ErrImagePull"),), VM, False)
    assert remote_failure("a", (), VM, watched=True) == (
        "VirtualMachine a is not on the target cluster"
    )
    assert remote_failure("a", (), VM, watched=False) == ""  # not listed yet: unseen, not gone
    pods = (_pod("a"), _pod("b"), _pod("c", phase="Succeeded", exited=True))
    seen = with_remote_failures(pods, {"b": (_view("b"),)}, VM, watched=True)
    assert (seen[0].phase, seen[0].exit_code, seen[0].exited) == ("Failed", FAILED_EXIT, True)
    assert seen[0].message == "VirtualMachine a is not on the target cluster"
    assert seen[1:] == pods[1:]  # its VM is there; an ended Pod stays as it ended


def _status(exporters: tuple[ExporterView, ...], pods: tuple[PodView, ...]) -> Any:
    observed = Observation(
        pool=pool(min_available=0, min_replicas=2, max_replicas=2),
        klass=klass(),
        exporters=exporters,
        pods=pods,
    )
    result = plan(observed, T0)
    return result, next(a.status for a in result.actions if isinstance(a, PatchStatus))


def test_an_instance_whose_vm_is_gone_fails_as_a_pod_does_but_never_while_leased() -> None:
    pods = with_remote_failures(
        (_pod("pool-a"), _pod("pool-b")), {"pool-b": (_view("pool-b"),)}, VM, watched=True
    )
    idle = (ready("pool-a", uid="uid-pool-a"), booting("pool-b", uid="uid-pool-b"))
    result, status = _status(idle, pods)
    assert status["podsFailed"] == 1  # replaced under the pool's backoff, as a failed Pod
    assert any(isinstance(a, RememberBackoff) for a in result.actions)
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert "VirtualMachine pool-a is not on the target cluster" in degraded["message"]
    leased = (ready("pool-a", uid="uid-pool-a", lease_ref="lease-1"), idle[1])
    result, status = _status(leased, pods)
    assert not any(isinstance(a, (RememberBackoff, Remove)) for a in result.actions)


def test_a_retained_exporter_wakes_the_set_it_came_from() -> None:
    """Its deletion is what lets that set's sweep take its VM (reconciler.runtime.targets)."""
    meta = {"namespace": "lab", "name": "pool-x", "annotations": {RETAINED_FROM: "pool"}}
    retained = {"metadata": meta}
    assert pool_keys(retained) == {("lab", "pool")}
    assert pool_keys({"metadata": {"namespace": "lab", "name": "stray"}}) == set()
