"""Urgent keys (a Lease took capacity) are served before ordinary ones, in arrival order,
without giving up the queue's de-duplication or its one-worker-per-key rule."""

from __future__ import annotations

from reconciler.workqueue import WorkQueue


def drain(queue: WorkQueue[str]) -> list[str]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_urgent_keys_go_first_in_arrival_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b"):
        queue.add(key)
    queue.add("u1", urgent=True)
    queue.add("c")
    queue.add("u2", urgent=True)
    assert drain(queue) == ["u1", "u2", "a", "b", "c"]


def test_an_ordinary_key_made_urgent_moves_up_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("c", urgent=True)
    queue.add("c", urgent=True)  # already urgent: stays where it is
    queue.add("b", urgent=True)
    queue.add("a")  # already queued: no duplicate, no demotion of anything
    assert len(queue) == 3
    assert drain(queue) == ["c", "b", "a"]


def test_urgent_while_processing_is_requeued_urgent_when_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    taken = queue.get(timeout=0)
    assert taken == "a"
    queue.add("b")
    queue.add("a", urgent=True)
    assert queue.get(timeout=0) == "b"  # "a" is still being processed
    queue.done("b")
    queue.add("c")
    queue.done("a")
    assert drain(queue) == ["a", "c"]


def test_close_forgets_urgent_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("u", urgent=True)
    queue.close()
    assert queue.get(timeout=0) is None
