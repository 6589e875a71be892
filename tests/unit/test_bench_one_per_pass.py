"""The refill benchmark's baseline creates one instance per pass, and only that differs."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bench._one_per_pass import REQUEUE, one_create_per_pass
from pool.model.actions import CreateExporter, PatchStatus
from pool.rules.planner import Plan


def a_plan(*actions: object, requeue: timedelta | None = None) -> Plan:
    return Plan(
        actions=tuple(actions),  # type: ignore[arg-type]
        status={},
        desired=3,
        buckets={},
        pending_leases=0,
        requeue_after=requeue,
    )


def test_keeps_the_first_create_and_every_other_step_and_requeues() -> None:
    status = PatchStatus({"replicas": 1})
    result = one_create_per_pass(
        a_plan(CreateExporter("pool-1"), CreateExporter("pool-2"), status, CreateExporter("pool-3"))
    )
    assert result.actions == (CreateExporter("pool-1"), status)
    assert result.requeue_after == REQUEUE


def test_an_earlier_requeue_of_the_plan_stays() -> None:
    soon = timedelta(milliseconds=100)
    result = one_create_per_pass(a_plan(CreateExporter("a-0"), CreateExporter("a-1"), requeue=soon))
    assert result.requeue_after == soon


def test_a_plan_with_at_most_one_create_is_unchanged() -> None:
    for plan in (a_plan(), a_plan(CreateExporter("a-0")), a_plan(PatchStatus({}))):
        assert one_create_per_pass(plan) is plan
    later = a_plan(CreateExporter("a-0"), requeue=timedelta(minutes=5))
    assert one_create_per_pass(later) == replace(later)
