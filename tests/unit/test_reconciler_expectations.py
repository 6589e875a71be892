"""The runtime's expectations: writes the caches have not shown yet are not repeated."""

from __future__ import annotations

from pool.model.access import PODS
from pool.model.actions import DeletePod
from pool.model.keys import NAME_LABEL
from reconciler.runtime.expectations import EXPORTER, POD, Expectations
from tests.unit.test_reconciler_step_failures import NS, SET, make_lab

KEY = ("ns", "pool")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_create_is_expected_until_the_cache_shows_it_or_its_time_is_up() -> None:
    clock = Clock()
    expectations = Expectations(ttl=30, clock=clock)
    expectations.expect(KEY, EXPORTER, "pool-abcde")
    expectations.expect(KEY, POD, "uid-1")
    assert expectations.pending(KEY, EXPORTER, lambda n: False) == {"pool-abcde"}
    assert expectations.pending(KEY, EXPORTER, lambda n: n == "pool-abcde") == frozenset()
    clock.now = 31
    assert expectations.pending(KEY, POD, lambda n: False) == frozenset()


def test_the_status_written_stands_in_until_the_cached_set_changes() -> None:
    clock = Clock()
    expectations = Expectations(ttl=30, clock=clock)
    cached = {"conditions": [{"type": "Progressing", "reason": "ScalingUp"}]}
    written = {"conditions": [{"type": "Progressing", "reason": "WaitingForCredentials"}]}
    expectations.wrote_status(KEY, "41", written)
    assert expectations.status(KEY, "41", cached) == written  # the cache still has rv 41
    clock.now = 300  # a watch minutes behind: planned from `cached`, the same patch again
    assert expectations.status(KEY, "41", cached) == written
    assert expectations.status(KEY, "42", cached) == cached  # it moved on: its own view
    assert expectations.status(KEY, "41", cached) == cached


def test_an_event_is_written_once_within_its_time() -> None:
    clock = Clock()
    expectations = Expectations(ttl=30, clock=clock)
    assert expectations.new_event(KEY, "WaitingForCredentials", "2 wait")
    assert not expectations.new_event(KEY, "WaitingForCredentials", "2 wait")
    assert expectations.new_event(KEY, "WaitingForCredentials", "1 waits")
    clock.now = 30
    assert expectations.new_event(KEY, "Other", "")  # the remembered are pruned at most once
    clock.now = 30.5  # its 30 s are up, pruned or not
    assert expectations.new_event(KEY, "WaitingForCredentials", "2 wait")


def test_a_doubt_lasts_until_a_live_read_resolves_it() -> None:
    expectations = Expectations()
    expectations.doubt(KEY)
    assert expectations.doubted(KEY) and expectations.doubted(KEY)  # a failed read keeps it
    expectations.resolved(KEY)
    assert not expectations.doubted(KEY)


def test_a_pod_deleted_is_terminating_for_the_pass_before_the_cache_says_so() -> None:
    """An orphan Pod is deleted once: the pass right after the delete, planned from a
    cache that still shows it running, does not plan its delete again."""
    controller, kube = make_lab()
    orphan = {
        "metadata": {
            "name": "pool-gone",
            "namespace": NS,
            "uid": "pod-uid-1",
            "labels": {NAME_LABEL: SET},
            "ownerReferences": [{"kind": "Exporter", "uid": "uid-gone", "controller": True}],
        },
        "status": {"phase": "Running"},
    }
    kube.stored[PODS.plural, "pool-gone"] = orphan  # what a live GET finds
    controller.informers[PODS].apply("ADDED", orphan)
    first = controller.sync((NS, SET))
    assert first is not None and any(isinstance(a, DeletePod) for a in first.actions)
    assert ("delete", "pods", "pool-gone") in kube.writes
    second = controller.sync((NS, SET))  # the cache has not shown the deletion yet
    assert second is not None and not any(isinstance(a, DeletePod) for a in second.actions)
    assert kube.writes.count(("delete", "pods", "pool-gone")) == 1
