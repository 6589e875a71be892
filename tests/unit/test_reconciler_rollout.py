"""Rollouts (`pool.rules.stages.rollout`): outdated instances replaced one at a time,
with a surge of one, never a busy one, held by the pause annotation and by a failing new
revision; what the revision covers (`pool.model.adapt`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from pool.model.actions import CreateExporter, CreatePod, DeletePod, RecordEvent, Remove
from pool.model.adapt import class_view, pool_view
from pool.model.backoff import Backoff
from pool.model.keys import ROLLOUT
from pool.model.status import condition_of
from pool.model.views import ExporterView, LeaseView, Observation, PodView
from pool.rules.planner import Plan, plan
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready

OLD, NEW = "old", "new"  # the set's revisions; the class's is "" (so "new." is current)


def of(result: Plan, kind: type) -> list[Any]:
    return [a for a in result.actions if isinstance(a, kind)]


def outdated(name: str, minute: int = 0, **overrides: Any) -> ExporterView:
    return ready(name, minute, revision=f"{OLD}.", **overrides)


def current(name: str, minute: int = 10, **overrides: Any) -> ExporterView:
    return ready(name, minute, revision=f"{NEW}.", **overrides)


def observe(*exporters: ExporterView, **pool_fields: Any) -> Observation:
    fields: dict[str, Any] = {"min_available": 2, "cooldown": timedelta(0), "revision": NEW}
    fields.update(pool_fields)
    leases = tuple(
        LeaseView(e.lease_ref, {"matchLabels": {"board": "qemu"}}, e.name)
        for e in exporters
        if e.lease_ref
    )
    return Observation(pool(**fields), klass(), exporters, leases=leases)


def test_a_replacement_is_created_first_beside_the_outdated_instances() -> None:
    result = plan(observe(outdated("pool-a"), outdated("pool-b", 1)), T0)
    (create,) = of(result, CreateExporter)
    assert create.revision == f"{NEW}." and "pool-a" in create.why
    assert not of(result, Remove)
    progressing = condition_of(result.status, "Progressing")
    assert progressing["reason"] == "RollingOut"
    assert progressing["message"].startswith("0 of 2 instance(s) on the current revision")
    assert next(e.reason for e in of(result, RecordEvent)) == "RolloutStarted"


def test_while_the_replacement_boots_nothing_goes_and_scale_down_leaves_the_surge() -> None:
    obs = observe(outdated("pool-a"), outdated("pool-b", 1), booting("pool-c", 5, revision="new."))
    result = plan(obs, T0 + timedelta(hours=1))  # cooldown 0: a plain surplus would go
    assert not of(result, Remove) and not of(result, CreateExporter)
    boots = "replacement pool-c boots"
    assert dict(result.outdated) == {"pool-a": boots, "pool-b": boots}


def test_once_the_replacement_is_available_the_oldest_outdated_goes() -> None:
    result = plan(observe(outdated("pool-a"), outdated("pool-b", 1), current("pool-c")), T0)
    (remove,) = of(result, Remove)
    assert remove.name == "pool-a" and remove.fence
    assert not of(result, CreateExporter)


def test_at_the_ceiling_one_outdated_idle_instance_goes_first() -> None:
    result = plan(observe(outdated("pool-a"), outdated("pool-b", 1), max_replicas=2), T0)
    (remove,) = of(result, Remove)
    assert remove.name == "pool-a" and "maxReplicas 2" in remove.why
    assert not of(result, CreateExporter)
    # the removal under way holds the next: an unavailable budget of one
    fenced = replace(outdated("pool-a"), enabled=False, fenced=True, lease_ref="")
    held = plan(observe(fenced, outdated("pool-b", 1), max_replicas=2), T0)
    assert not [r for r in of(held, Remove) if r.name == "pool-b"]


def test_a_leased_instance_is_never_touched_and_waits_for_its_release() -> None:
    leased = outdated("pool-a", lease_ref="lab-1", exporter_status="LeaseReady")
    result = plan(observe(leased, current("pool-b"), current("pool-c"), min_available=2), T0)
    assert not of(result, Remove) and not of(result, CreateExporter)
    assert dict(result.outdated) == {"pool-a": "its lease: lease lab-1 must end"}
    message = condition_of(result.status, "Progressing")["message"]
    assert message == (
        "2 of 3 instance(s) on the current revision; 1 leased instance(s) wait for their release"
    )
    # under InPlaceReuse it comes back outdated and idle: then it is replaced
    back = plan(
        observe(outdated("pool-a"), current("pool-b"), current("pool-c"), recycle="InPlaceReuse"),
        T0,
    )
    assert [r.name for r in of(back, Remove)] == ["pool-a"]


def test_pause_holds_replacements_but_not_new_instances() -> None:
    result = plan(observe(outdated("pool-a"), min_available=3, rollout_paused=True), T0)
    creates = of(result, CreateExporter)
    assert len(creates) == 2 and all(c.revision == f"{NEW}." for c in creates)
    assert not of(result, Remove)
    progressing = condition_of(result.status, "Progressing")
    assert (progressing["reason"], progressing["status"]) == ("RolloutPaused", "False")
    assert any(ROLLOUT in w.reason for w in result.waits)
    steady = plan(observe(outdated("pool-a"), outdated("pool-b"), rollout_paused=True), T0)
    assert not of(steady, Remove) and not of(steady, CreateExporter)


def test_a_failing_new_revision_removes_no_healthy_outdated_instance() -> None:
    failed = booting("pool-c", 5, uid="pool-c", revision=f"{NEW}.", backoff_step=0)
    pod = PodView(
        "pool-c", "pool-c", "Failed", "pool-c", "p-c", created=T0, exited=True, exit_code=1,
        finished_at=T0 + timedelta(minutes=6), message="no such driver",
    )  # fmt: skip
    memory = Backoff(1, T0 + timedelta(minutes=6), "pool-c", "exited with code 1", f"{NEW}.")
    obs = replace(
        observe(outdated("pool-a"), outdated("pool-b", 1), failed, backoff=memory), pods=(pod,)
    )
    for minute in (6, 7, 60):
        result = plan(obs, T0 + timedelta(minutes=minute))
        assert not [r for r in of(result, Remove) if r.name != "pool-c"]
        degraded = condition_of(result.status, "Degraded")
        assert degraded["status"] == "True"
        assert degraded["message"].endswith("the rollout is stopped")
    # a fixed template is a new revision: the rollout resumes at once
    fixed = replace(obs, pool=replace(obs.pool, revision="fixed"))
    cleared = plan(fixed, T0 + timedelta(minutes=7))
    assert [r.name for r in of(cleared, Remove)] == ["pool-c"]  # a failure of before goes
    gone = replace(
        fixed, exporters=obs.exporters[:2], pods=(), pool=replace(fixed.pool, backoff=None)
    )
    assert of(plan(gone, T0 + timedelta(minutes=7)), CreateExporter)


def test_the_rollout_ends_with_one_event() -> None:
    rolling = plan(observe(outdated("pool-a"), current("pool-b"), current("pool-c")), T0)
    done = observe(current("pool-b"), current("pool-c"))
    done = replace(done, pool=replace(done.pool, status=rolling.status))
    result = plan(done, T0)
    assert [e.reason for e in of(result, RecordEvent) if e.reason.startswith("Rollout")] == [
        "RolloutComplete"
    ]
    assert result.outdated == ()


def test_outdated_instances_keep_only_their_token_current() -> None:
    obs = observe(outdated("pool-a"), current("pool-b"))
    pods = tuple(PodView(e.name, e.name, "Running") for e in obs.exporters)
    result = plan(replace(obs, pods=pods), T0)
    assert result.keep_current == ("pool-b",) and result.keep_token == ("pool-a",)


def test_an_instance_of_no_or_a_legacy_revision_is_current() -> None:
    legacy = ready("pool-a", revision="legacy.")
    result = plan(observe(legacy, ready("pool-b"), legacy_revision="legacy"), T0)
    assert result.outdated == () and not of(result, Remove)


def test_what_the_revision_covers() -> None:
    spec = {"virtualTargetClassName": "qemu", "minAvailableReplicas": 1,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}}}  # fmt: skip

    def rev(**changes: Any) -> str:
        return pool_view({"metadata": {"name": "p"}, "spec": {**spec, **changes}})[0].revision

    base = rev()
    assert rev(maxReplicas=9, minReplicas=1, scaleDownCooldown="1m") == base
    assert rev(recycleStrategy="InPlaceReuse", selector={"matchLabels": {}}) == base
    assert rev(images={"exporter": {"image": "e:2"}}) != base
    assert rev(parameters={"resources": {"memory": "4Gi"}}) != base
    assert rev(template={"metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}}}) != base

    def crev(**changes: Any) -> str:
        spec = {"provisioner": "q", **changes}
        return class_view({"metadata": {"name": "qemu"}, "spec": spec}).revision

    cbase = crev()
    assert crev(bindingMode="WaitForFirstConsumer", reclaimPolicy="Retain") == cbase
    assert crev(scheduling={"nodeSelector": {"n": "1"}}) != cbase
    assert crev(parameters={"arch": "aarch64"}) != cbase
    assert crev(images={"runtime": {"image": "r:2"}}) != cbase


def test_scale_down_removes_outdated_instances_first() -> None:
    """A surplus after its cooldown takes instances of the earlier revision first (as a
    Deployment scales its old ReplicaSet first), the rollout's own victim not twice."""
    pool_of = (outdated("pool-a"), outdated("pool-b", 1), current("pool-c"), current("pool-d", 11))
    result = plan(observe(*pool_of, min_available=1), T0 + timedelta(hours=1))
    removed = sorted(r.name for r in of(result, Remove))
    # the rollout takes the oldest outdated; scale-down the other outdated, then the newest
    assert removed == ["pool-a", "pool-b", "pool-d"], removed
    paused = observe(*pool_of, min_available=2, rollout_paused=True)
    held = plan(paused, T0 + timedelta(hours=1))
    assert sorted(r.name for r in of(held, Remove)) == ["pool-a", "pool-b"]


def test_under_in_place_reuse_an_outdated_instance_whose_pod_finished_is_replaced() -> None:
    """A new Pod would boot it from the new spec only for the rollout to replace it: it
    goes instead (a current one whose Pod finished gets a new Pod, as before)."""

    def finished(name: str) -> PodView:
        return PodView(name, name, "Succeeded", name, f"pod-{name}", created=T0, exited=True,
                       exit_code=0)  # fmt: skip

    obs = observe(outdated("pool-a"), current("pool-c"), current("pool-d", 11),
                  recycle="InPlaceReuse")  # fmt: skip
    result = plan(replace(obs, pods=(finished("pool-a"),)), T0 + timedelta(minutes=30))
    (remove,) = of(result, Remove)
    assert remove.name == "pool-a" and remove.why == "its Pod finished (outdated)"
    assert not [p for p in of(result, CreatePod) if p.exporter == "pool-a"]
    assert not of(result, DeletePod)  # Remove deletes its Pod; no restart is asked for
    again = plan(replace(obs, pods=(finished("pool-c"),)), T0 + timedelta(minutes=30))
    assert not of(again, Remove)
    assert [p.name for p in of(again, DeletePod)] == ["pool-c"]  # a new Pod follows
