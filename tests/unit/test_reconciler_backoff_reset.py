"""A change of the set's template, images or class ends the backoff: failures of an
earlier revision are no reason to wait (`pool.rules.stages.failures`, REVISION)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pool.model.actions import CreateExporter, RememberBackoff, Remove
from pool.model.adapt import class_view, pool_view
from pool.model.backoff import Backoff
from pool.model.views import ExporterView, Observation, PodView
from pool.rules.planner import Plan, plan
from tests.unit.test_reconciler_support import T0, booting, klass, pool

S = timedelta(seconds=1)
OLD, NEW = "aaa", "bbb"


def failing(name: str, at: int, step: int, revision: str) -> tuple[ExporterView, PodView]:
    exporter = booting(name, uid=name, backoff_step=step, revision=f"{revision}.")
    pod = PodView(
        name, name, "Succeeded", name, f"pod-{name}", created=T0, exited=True, exit_code=0,
        finished_at=T0 + at * S, message="Driver not installed",
    )  # fmt: skip
    return exporter, pod


def observe(
    items: list[tuple[ExporterView, PodView]], revision: str, memory: Backoff | None = None
) -> Observation:
    return Observation(
        pool=pool(min_available=3, max_replicas=10, revision=revision, backoff=memory),
        klass=klass(),
        exporters=tuple(e for e, _ in items),
        pods=tuple(p for _, p in items),
    )


def of(result: Plan, kind: type) -> list[Any]:
    return [a for a in result.actions if isinstance(a, kind)]


def test_a_changed_spec_ends_the_backoff_and_fills_the_pool_in_one_step() -> None:
    failures = [failing("pool-a", 1, 3, OLD), failing("pool-b", 2, 4, OLD)]
    # Unchanged: the newest failure waits out delay(4) = 80 s, nothing is created.
    noted = plan(observe(failures, OLD), T0 + 10 * S)
    (memory,) = of(noted, RememberBackoff)
    assert memory.backoff is not None and memory.backoff.failures == 5
    waiting = plan(observe(failures, OLD, memory.backoff), T0 + 10 * S)
    assert not of(waiting, CreateExporter)
    assert [r.name for r in of(waiting, Remove)] == ["pool-a"]
    # Fixed (a new revision): every failed instance goes, the warm buffer is created now,
    # as a healthy pool's (step 0), under the new revision.
    fixed = plan(observe(failures, NEW, memory.backoff), T0 + 10 * S)
    assert of(fixed, RememberBackoff) == [RememberBackoff(None)]  # forgotten
    assert sorted(r.name for r in of(fixed, Remove)) == ["pool-a", "pool-b"]
    creates = of(fixed, CreateExporter)
    assert len(creates) == 3 and {(c.step, c.revision) for c in creates} == {(0, f"{NEW}.")}
    degraded = next(c for c in fixed.status["conditions"] if c["type"] == "Degraded")  # type: ignore[attr-defined]
    assert degraded["status"] == "False"


def test_a_probe_of_an_earlier_revision_holds_nothing_back() -> None:
    probe = booting("pool-p", uid="p", backoff_step=2, revision=f"{OLD}.")
    result = plan(Observation(pool(min_available=3, revision=NEW), klass(), (probe,)), T0)
    assert len(of(result, CreateExporter)) == 2  # the probe counts as booting capacity
    same = plan(Observation(pool(min_available=3, revision=OLD), klass(), (probe,)), T0)
    assert not of(same, CreateExporter)  # a probe of the current revision: wait for it


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.integers(0, 8), min_size=1, max_size=5), at=st.integers(0, 400))
def test_after_a_change_no_failure_of_before_delays_a_create(steps: list[int], at: int) -> None:
    failures = [failing(f"pool-{i}", i, s, OLD) for i, s in enumerate(steps)]
    result = plan(observe(failures, NEW), T0 + at * S)
    assert len(of(result, CreateExporter)) == 3
    assert not result.waits or all(w.action is None for w in result.waits)


def test_the_revision_follows_what_an_instance_is_rendered_from() -> None:
    base = {
        "metadata": {"name": "pool", "namespace": "ns", "generation": 1},
        "spec": {"virtualTargetClassName": "qemu", "minAvailableReplicas": 1,
                 "template": {"spec": {"drivers": [{"name": "a", "type": "x"}]}}},
    }  # fmt: skip
    rev = pool_view(base)[0].revision
    scaled = {**base, "spec": {**base["spec"], "minAvailableReplicas": 5, "maxReplicas": 9}}
    assert pool_view(scaled)[0].revision == rev  # scaling is no repair
    fixed = {**base, "spec": {**base["spec"], "template": {"spec": {"drivers": []}}}}
    assert pool_view(fixed)[0].revision != rev
    images = {**base, "spec": {**base["spec"], "images": {"exporter": {"image": "e:2"}}}}
    assert pool_view(images)[0].revision != rev
    one = class_view({"metadata": {"name": "qemu"}, "spec": {"parameters": {"a": 1}}})
    two = class_view({"metadata": {"name": "qemu"}, "spec": {"parameters": {"a": 2}}})
    assert one.revision != two.revision
    blank = {"revision": "", "legacy_revision": ""}
    assert replace(one, **blank) == replace(two, **blank)
