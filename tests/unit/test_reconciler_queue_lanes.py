"""Keys in higher lanes (a Lease took capacity; credentials came) are served before those
in lower ones, in arrival order within a lane, without giving up the queue's
de-duplication or its one-worker-per-key rule."""

from __future__ import annotations

from reconciler.runtime.workqueue import WorkQueue


def drain(queue: WorkQueue[str]) -> list[str]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_higher_lanes_go_first_in_arrival_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b"):
        queue.add(key)
    queue.add("u1", lane=1)
    queue.add("c")
    queue.add("u2", lane=1)
    assert drain(queue) == ["u1", "u2", "a", "b", "c"]


def test_a_queued_key_added_in_a_higher_lane_moves_up_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("c", lane=1)
    queue.add("c", lane=1)  # already in that lane: stays where it is
    queue.add("b", lane=1)
    queue.add("a")  # already queued: no duplicate, no demotion of anything
    assert len(queue) == 3
    assert drain(queue) == ["c", "b", "a"]


def test_a_higher_lane_while_processing_is_kept_for_the_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    taken = queue.get(timeout=0)
    assert taken == "a"
    queue.add("b")
    queue.add("a", lane=1)
    assert queue.get(timeout=0) == "b"  # "a" is still being processed
    queue.done("b")
    queue.add("c")
    queue.done("a")
    assert drain(queue) == ["a", "c"]


def test_close_forgets_every_lane() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("u", lane=1)
    queue.close()
    assert queue.get(timeout=0) is None


def test_three_lanes_highest_first() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ordinary")
    queue.add("pods", lane=1)
    queue.add("refill", lane=2)
    queue.add("pods-2", lane=1)
    assert drain(queue) == ["refill", "pods", "pods-2", "ordinary"]
