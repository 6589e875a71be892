"""Pure parts of the runtime: work queue semantics, adapter, rendering, ACCESS."""

from __future__ import annotations

from typing import Any

from api.access import NAMESPACED
from pool.model.access import (
    ACCESS,
    EXPORTERS,
    EXPORTERSETS,
    MEMORY_LEASES,
    PODS,
    SECRETS,
    WATCHED,
    allowed,
)
from pool.model.adapt import exporter_view, lease_view, pool_view
from pool.model.keys import SET_LABEL, SURPLUS_SINCE
from pool.rendering.provisioners.qemu import DEFAULT_IMAGES
from pool.rendering.render import render_exporter, resolve_image
from reconciler.runtime.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_queue_deduplicates_and_requeues_keys_added_while_processing() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 1
    assert queue.get(timeout=0) == "a"
    queue.add("a")  # while processing: not handed out twice
    assert queue.get(timeout=0) is None
    queue.done("a")
    assert queue.get(timeout=0) == "a"


def test_queue_backoff_is_exponential_and_forget_resets_it() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(base_delay=1, max_delay=5, clock=clock)
    assert [queue.add_rate_limited("a") for _ in range(4)] == [1, 2, 4, 5]
    queue.forget("a")
    assert queue.add_rate_limited("a") == 1


def test_queue_add_after_waits_for_the_deadline() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10)
    assert queue.get(timeout=0) is None
    clock.t = 10
    assert queue.get(timeout=0) == "a"


def test_queue_keeps_one_deadline_per_key_the_soonest() -> None:
    """As client-go's delaying queue: a later requeue of a key that waits already is
    dropped (the pass at the sooner one plans its own next), a sooner one replaces it; so
    a key comes due once, not once per requeue asked."""
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10)
    queue.add_after("a", 20)  # dropped
    queue.add_after("b", 10)
    queue.add_after("b", 5)  # replaces 10
    clock.t = 5
    assert queue.get(timeout=0) == "b"
    queue.done("b")
    assert queue.get(timeout=0) is None
    clock.t = 10
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    clock.t = 20
    assert queue.get(timeout=0) is None  # neither b's replaced 10 nor a's dropped 20 comes due
    queue.add_after("a", 1)  # a key that came due may be delayed again
    clock.t = 21
    assert queue.get(timeout=0) == "a"


def test_a_pass_s_plan_replaces_the_deadline_asked_before_it() -> None:
    """A pass's plan is made from the state as now observed: the requeue an earlier pass
    asked (a wait for credentials, say) goes when this pass plans none; a deadline asked
    during the pass (the leftovers' lease protection) stays, even behind a sooner old one."""
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10)  # the first pass's safety net
    queue.add("a")  # an event: the credentials arrived
    assert queue.get(timeout=0) == "a"
    queue.replan("a", None)  # this pass plans no requeue
    queue.done("a")
    clock.t = 10
    assert queue.get(timeout=0) is None

    queue.add_after("b", 5)  # an earlier plan's
    queue.add("b")
    assert queue.get(timeout=0) == "b"
    queue.add_after("b", 30)  # asked during the pass, after the taking: clock.t + 30
    queue.replan("b", 20)  # the pass's own plan: clock.t + 20
    queue.done("b")
    clock.t = 15
    assert queue.get(timeout=0) is None  # the earlier plan's 5 s went
    clock.t = 30
    assert queue.get(timeout=0) == "b"  # the sooner of the two asked during the pass
    queue.replan("b", None)
    queue.done("b")
    clock.t = 40
    assert queue.get(timeout=0) is None


def test_a_closed_queue_hands_out_no_delayed_key() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 1)
    queue.close()
    clock.t = 2
    assert queue.get(timeout=0) is None


def test_closed_queue_returns_none() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.close()
    assert queue.get() is None


SET: dict[str, Any] = {
    "metadata": {
        "name": "pool",
        "namespace": "ns",
        "uid": "u-set",
        "generation": 3,
        "annotations": {SURPLUS_SINCE: "2026-01-01T00:00:00Z"},
    },
    "spec": {
        "virtualTargetClassName": "qemu",
        "selector": {"matchLabels": {"board": "x"}},
        "template": {"metadata": {"labels": {"board": "x"}, "annotations": {"a": "b"}}},
        "images": {"runtime": {"image": "example.com/set-runtime:1"}},
        "parameters": {"resources": {"cpu": 4}},
    },
}
CLASS: dict[str, Any] = {
    "metadata": {"name": "qemu", "namespace": "ns"},
    "spec": {
        "provisioner": "qemu.jumpstarter.dev",
        "images": {
            "runtime": {"image": "example.com/class-runtime:1"},
            "exporter": {"imagePullPolicy": "Always"},
        },
        "parameters": {"resources": {"cpu": 2, "memory": "4Gi"}},
        "scheduling": {
            "nodeSelector": {"kvm": "yes"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "caBundleConfigMapRef": {"name": "corp-ca"},
        "credentialsSecretRef": {"name": "creds"},
    },
}


def test_pool_view_applies_schema_defaults_and_reads_the_surplus_memory() -> None:
    view, problem = pool_view(SET)
    assert problem is None
    assert (view.max_replicas, view.min_available, view.recycle) == (4, 0, "ExitAndReplace")
    assert view.cooldown.total_seconds() == 300
    assert view.surplus_since is not None and view.generation == 3


def test_bad_cooldown_is_a_problem_not_a_crash() -> None:
    bad = {**SET, "spec": {**SET["spec"], "scaleDownCooldown": "soon"}}
    assert pool_view(bad)[1] is not None and pool_view(bad)[1][0] == "InvalidSpec"  # type: ignore[index]


def test_exporter_and_lease_views() -> None:
    exporter = exporter_view(
        {
            "metadata": {"name": "pool-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"enabled": False},
            "status": {
                "conditions": [{"type": "Online", "status": "True"}],
                "leaseHooks": {"leaseRef": {"name": "l"}, "beforeLease": {"phase": "Succeeded"}},
                "recordsLeaseHooks": True,
            },
        }
    )
    assert not exporter.enabled and exporter.online and not exporter.registered
    assert exporter.hooks is not None and exporter.hooks.after_phase is None
    lease = lease_view({"metadata": {"name": "l"}, "status": {"exporterRef": {"name": "pool-0"}}})
    assert lease.exporter == "pool-0" and not lease.ended


def test_render_exporter_names_labels_and_owner() -> None:
    exporter = render_exporter(SET, "pool-")
    meta = exporter["metadata"]
    assert meta["generateName"] == "pool-" and "name" not in meta  # names never reused
    assert meta["labels"] == {"board": "x", SET_LABEL: "pool"}
    assert meta["annotations"] == {"a": "b"}
    assert meta["ownerReferences"][0]["uid"] == "u-set"
    assert meta["ownerReferences"][0]["controller"] is True


def test_images_set_over_class_over_default() -> None:
    assert resolve_image("runtime", SET, CLASS, DEFAULT_IMAGES["runtime"]).image == (
        "example.com/set-runtime:1"
    )
    exporter = resolve_image("exporter", SET, CLASS, DEFAULT_IMAGES["exporter"])
    assert exporter.image == DEFAULT_IMAGES["exporter"].image
    assert exporter.pull_policy == "Always"


def test_access_covers_every_watched_resource_and_the_writes() -> None:
    for resource in WATCHED:
        assert allowed(resource, "list", mode=NAMESPACED)
        assert allowed(resource, "watch", mode=NAMESPACED)
        # cluster-wide, Secrets are read by name only (reconciler.runtime.named)
        assert allowed(resource, "watch") == (resource != SECRETS)
    assert allowed(SECRETS, "get") and allowed(SECRETS, "update")
    # the pool's memory: the set's annotations cluster-wide, a Lease when namespaced
    assert allowed(EXPORTERSETS, "patch") and not allowed(EXPORTERSETS, "patch", mode=NAMESPACED)
    assert allowed(MEMORY_LEASES, "patch", mode=NAMESPACED) and not allowed(MEMORY_LEASES, "patch")
    assert allowed(EXPORTERS, "create") and allowed(PODS, "delete")
    assert not allowed(EXPORTERS, "update")
    assert all(p.verbs for p in ACCESS)


def test_reconcile_cli_errors_are_one_line(tmp_path: Any, capsys: Any) -> None:
    from virtualtarget.cli import main

    assert main(["reconcile", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert main(["reconcile", "--provisioner", "nope.example.com"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("reconcile: ") for line in lines)
    assert "no such file" in lines[0] and "unknown provisioner" in lines[1]
