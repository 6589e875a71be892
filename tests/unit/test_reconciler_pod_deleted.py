"""A Pod deleted while its exporter ran (by hand, an eviction) is going, not finished:
its instance keeps its Exporter and gets a new Pod once the old one is gone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pool.model.access import PODS
from pool.model.actions import CreateExporter, CreatePod, DeletePod, Remove
from pool.model.adapt import pod_view, pod_view_after
from pool.model.views import Observation, PodView
from pool.rules.buckets import Bucket
from pool.rules.planner import Plan, plan
from reconciler.runtime.cache import Informer
from tests.unit.test_reconciler_support import T0, klass, pool, ready

S = timedelta(seconds=1)


def observe(pods: list[PodView], recycle: str = "ExitAndReplace", **kw: Any) -> Observation:
    return Observation(
        pool=pool(min_available=1, recycle=recycle, **kw),
        klass=klass(),
        exporters=(ready("pool-0", uid="u0", registered_at=T0),),
        pods=tuple(pods),
    )


def pod(asked: int | None, ended: int | None, phase: str = "Succeeded", code: int = 0) -> PodView:
    """The instance's Pod; deleted at T0 + `asked` s, its exporter ended at T0 + `ended` s."""
    return PodView(
        "pool-0-x", "pool-0", phase, "u0", "p0", deleting=asked is not None, created=T0,
        delete_requested=None if asked is None else T0 + asked * S, exited=ended is not None,
        exit_code=None if ended is None else code,
        finished_at=None if ended is None else T0 + ended * S,
    )  # fmt: skip


def of(result: Plan, kind: type) -> list[Any]:
    return [a for a in result.actions if isinstance(a, kind)]


def test_a_pod_deleted_while_it_ran_keeps_the_instance_and_a_new_pod_follows() -> None:
    # kubectl delete at 10 s: the exporter ends at 11 s, the Pod reports Succeeded.
    going = plan(observe([pod(asked=10, ended=11)]), T0 + 12 * S)
    assert not of(going, Remove) and not of(going, CreateExporter)
    assert not of(going, DeletePod)  # being deleted already
    assert going.buckets[Bucket.PROVISIONING] == 1 and going.buckets[Bucket.AVAILABLE] == 0
    assert any("is being deleted" in w.reason for w in going.waits)
    assert going.status["availableReplicas"] == 0
    # Still running while it terminates: the same.
    running = plan(observe([pod(asked=10, ended=None, phase="Running")]), T0 + 12 * S)
    assert not of(running, Remove) and running.buckets[Bucket.AVAILABLE] == 0
    # Gone: the same Exporter gets a new Pod.
    gone = plan(observe([]), T0 + 13 * S)
    assert of(gone, CreatePod) == [CreatePod("pool-0", "credentials issued, no Pod yet")]
    assert not of(gone, CreateExporter) and not of(gone, Remove)


def test_a_pod_that_finished_before_its_deletion_still_finished() -> None:
    # The exporter ended at 5 s, the deletion came at 10 s: finished (ExitAndReplace).
    (remove,) = of(plan(observe([pod(asked=10, ended=5)]), T0 + 12 * S), Remove)
    assert remove.name == "pool-0"
    # A non-zero exit before the deletion is a failure, deleted or not.
    failed = plan(observe([pod(asked=10, ended=5, phase="Failed", code=1)]), T0 + 12 * S)
    assert failed.buckets[Bucket.FAILED] == 1 and failed.status["podsFailed"] == 1


def test_in_place_reuse_waits_for_the_deleted_pod_to_go() -> None:
    result = plan(observe([pod(asked=10, ended=11)], recycle="InPlaceReuse"), T0 + 12 * S)
    assert not of(result, Remove) and not of(result, DeletePod) and not of(result, CreatePod)
    assert "pool-0" not in result.keep_current  # nothing is written to a Pod that goes


@settings(max_examples=200, deadline=None)
@given(
    asked=st.integers(0, 60),
    after=st.one_of(st.none(), st.integers(0, 60)),
    phase=st.sampled_from(["Running", "Succeeded", "Failed"]),
    code=st.integers(0, 2),
    recycle=st.sampled_from(["ExitAndReplace", "InPlaceReuse"]),
)
def test_a_pod_deleted_before_it_ended_never_costs_the_instance(
    asked: int, after: int | None, phase: str, code: int, recycle: str
) -> None:
    ended = None if after is None else asked + after
    result = plan(observe([pod(asked, ended, phase, code)], recycle=recycle), T0 + 200 * S)
    assert not of(result, Remove), result.actions
    assert not of(result, CreateExporter), result.actions
    assert not of(result, DeletePod) and not of(result, CreatePod)
    assert result.buckets[Bucket.FAILED] == 0 and result.status["podsFailed"] == 0


def test_the_deletion_request_is_the_timestamp_less_its_grace_period() -> None:
    obj = {
        "metadata": {
            "name": "pool-0-x",
            "uid": "p0",
            "deletionTimestamp": "2026-01-01T00:00:40Z",
            "deletionGracePeriodSeconds": 30,
        },
        "status": {"phase": "Running"},
    }
    view = pod_view(obj)
    assert view.deleting and view.delete_requested == T0 + 10 * S
    assert pod_view({"metadata": {"name": "p"}}).delete_requested is None


def _event(phase: str, deletion: str | None, grace: int | None, ended: str | None) -> Any:
    meta: dict[str, Any] = {"name": "pool-0-x", "namespace": "ns", "uid": "p0"}
    if deletion is not None:
        meta |= {"deletionTimestamp": deletion, "deletionGracePeriodSeconds": grace}
    state = {"terminated": {"exitCode": 0, "finishedAt": ended}} if ended else {"running": {}}
    return {
        "metadata": meta,
        "status": {"phase": phase, "containerStatuses": [{"name": "exporter", "state": state}]},
    }


def test_the_kubelets_final_delete_does_not_turn_a_deleted_pod_into_a_finished_one() -> None:
    """The events of a Pod deleted by hand on a node (kube-apiserver and kubelet 1.36):
    `kubectl delete` at 00:00:10 (grace 30), the exporter ends at 00:00:11, then the
    kubelet's grace-0 delete at 00:00:12 sets deletionTimestamp to that moment. Through
    the Pod cache the deletion still counts from 00:00:10: the Pod is going, not done."""
    cache = Informer(None, PODS, derive=pod_view, carry=pod_view_after)  # type: ignore[arg-type]
    events = [
        _event("Running", None, None, None),
        _event("Running", "2026-01-01T00:00:40Z", 30, None),
        _event("Succeeded", "2026-01-01T00:00:40Z", 30, "2026-01-01T00:00:11Z"),
        _event("Succeeded", "2026-01-01T00:00:12Z", 0, "2026-01-01T00:00:11Z"),
    ]
    for event in events:
        cache.apply("MODIFIED", event)
    cache.add_index("all", lambda o: ["x"])
    (view,) = cache.derived_by_index("all", "x")
    assert pod_view(events[-1]).done  # the last event alone looks like an exit
    assert view.delete_requested == T0 + 10 * S and view.going and not view.done
    # A Pod that ended before anyone deleted it keeps its first request too: still done.
    cache.apply("DELETED", events[-1])
    for event in [
        _event("Succeeded", None, None, "2026-01-01T00:00:05Z"),
        _event("Succeeded", "2026-01-01T00:00:10Z", 0, "2026-01-01T00:00:05Z"),
    ]:
        cache.apply("MODIFIED", event)
    (view,) = cache.derived_by_index("all", "x")
    assert view.done and view.delete_requested == T0 + 10 * S
