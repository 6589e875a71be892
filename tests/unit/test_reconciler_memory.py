"""Where a pool keeps its memory: the set's annotations in a cluster-wide install, a
coordination Lease beside the set in a namespaced one (`reconciler.runtime.memory`); and the
backoff's annotation value, read back as it was written (`pool.model.backoff`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pool.model.access import EXPORTERSETS, MEMORY_LEASES
from pool.model.actions import RememberBackoff, RememberDemand, SetSurplusSince
from pool.model.adapt import pool_view, remembered
from pool.model.backoff import Backoff, decode, encode
from pool.model.demand import DemandMemory, encode_demand
from pool.model.keys import BACKOFF, DEMAND, SURPLUS_SINCE
from pool.rendering.provisioners import provisioner
from reconciler.runtime.executor import Executor, Pass, Runtime
from reconciler.runtime.kube import ApiError
from reconciler.runtime.memory import MemoryLeases, lease_name
from tests.unit.test_reconciler_support import T0, Held

SET: dict[str, Any] = {
    "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
    "kind": "ExporterSet",
    "metadata": {"name": "pool", "namespace": "ns", "uid": "u-set"},
    "spec": {"virtualTargetClassName": "qemu"},
}
FAILING = Backoff(3, T0, "pool-x7k2p", "exited (no termination message)", "abc.def")


class RecordingKube:
    """Answers as the apiserver would for one Lease; records every write."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any, str, dict[str, Any]]] = []
        self.lease: dict[str, Any] | None = None

    def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        return self.lease

    def create(self, resource: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("create", resource, body["metadata"]["name"], body))
        if resource == MEMORY_LEASES:
            if self.lease is not None:
                raise ApiError(409, "AlreadyExists")
            self.lease = body
        return body

    def patch(
        self, resource: Any, namespace: str, name: str, body: dict[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        self.writes.append(("patch", resource, name, body))
        return body


def executor(kube: RecordingKube, memory: MemoryLeases | None) -> Executor:
    runtime = Runtime(
        kube,  # type: ignore[arg-type]
        provisioner("qemu.jumpstarter.dev"),
        exporters=Held(),  # type: ignore[arg-type]
        secrets=Held(),  # type: ignore[arg-type]
        memory=memory,
    )
    return Executor(runtime, Pass(SET, None, T0))


@given(
    st.integers(1, 40),
    st.integers(0, 10**9),
    st.text(min_size=1, max_size=63),
    st.text(max_size=320),
    st.text(max_size=30),
)
def test_the_backoff_reads_back_as_written(
    failures: int, seconds: int, instance: str, quote: str, revision: str
) -> None:
    backoff = Backoff(failures, T0 + timedelta(seconds=seconds), instance, quote, revision)
    assert decode(encode(backoff)) == backoff


def test_an_unreadable_backoff_is_forgotten_not_fatal() -> None:
    for junk in ("", "{", "[]", '{"failures": 0, "lastFailure": "2026-01-01T00:00:00Z"}',
                 '{"failures": "3", "lastFailure": "2026-01-01T00:00:00Z"}',
                 '{"failures": 3, "lastFailure": "yesterday"}', None, 7):  # fmt: skip
        assert decode(junk) is None
    annotated = {**SET, "metadata": {**SET["metadata"], "annotations": {BACKOFF: "{"}}}
    assert pool_view(annotated)[0].backoff is None


def test_cluster_wide_the_set_s_annotation_holds_the_backoff() -> None:
    kube = RecordingKube()
    run = executor(kube, None)
    run.run([RememberBackoff(FAILING), RememberBackoff(None)])
    assert kube.writes == [
        ("patch", EXPORTERSETS, "pool", {"metadata": {"annotations": {BACKOFF: encode(FAILING)}}}),
        ("patch", EXPORTERSETS, "pool", {"metadata": {"annotations": {BACKOFF: None}}}),
    ]
    annotated = {**SET, "metadata": {**SET["metadata"], "annotations": {BACKOFF: encode(FAILING)}}}
    assert pool_view(annotated)[0].backoff == FAILING


def test_namespaced_the_set_s_lease_holds_the_backoff_beside_the_cooldown() -> None:
    kube = RecordingKube()
    memory = MemoryLeases(kube)  # type: ignore[arg-type]
    run = executor(kube, memory)
    run.run([RememberBackoff(FAILING)])
    (create,) = kube.writes
    assert create[:3] == ("create", MEMORY_LEASES, lease_name("pool"))
    lease = create[3]["metadata"]
    assert lease["annotations"] == {BACKOFF: encode(FAILING)}
    assert lease["ownerReferences"][0]["uid"] == "u-set"  # collected with the set
    run.run([SetSurplusSince(T0)])  # the same Lease, patched: the backoff stays
    assert kube.writes[-1][:3] == ("patch", MEMORY_LEASES, lease_name("pool"))
    held = memory.read(SET)
    assert held is not None
    assert remembered(held) == {"surplus_since": T0, "backoff": FAILING, "demand": None}
    assert SURPLUS_SINCE in held
    # A new process reads the Lease once, and finds what the last one wrote.
    fresh = MemoryLeases(kube)  # type: ignore[arg-type]
    assert remembered(fresh.read(SET) or {})["backoff"] == FAILING
    run.run([RememberBackoff(None)])
    assert kube.writes[-1][3] == {"metadata": {"annotations": {BACKOFF: None}}}
    assert remembered(memory.read(SET) or {})["backoff"] is None


def test_a_lease_made_for_the_backoff_keeps_the_cooldown_the_set_s_annotation_holds() -> None:
    """A takeover: Jumpstarter's controller left a running cooldown in the set's
    annotation, which a namespaced install may not write. The Lease, once made (here for
    the backoff), starts with it, so the cooldown runs on."""
    taken = {
        **SET,
        "metadata": {**SET["metadata"], "annotations": {SURPLUS_SINCE: "2026-01-01T00:00:00Z"}},
    }
    kube = RecordingKube()
    memory = MemoryLeases(kube)  # type: ignore[arg-type]
    assert memory.read(taken) is None  # no Lease: the set's annotations are read
    memory.remember(taken, {BACKOFF: encode(FAILING)})
    (create,) = kube.writes
    assert create[3]["metadata"]["annotations"] == {
        SURPLUS_SINCE: "2026-01-01T00:00:00Z",
        BACKOFF: encode(FAILING),
    }
    assert remembered(memory.read(taken) or {}) == {
        "surplus_since": T0,
        "backoff": FAILING,
        "demand": None,
    }


def test_the_demand_memory_is_kept_beside_the_backoff_and_read_by_a_new_process() -> None:
    learned = DemandMemory(T0, 0.02, (150.0, 170.0), 3)
    kube = RecordingKube()
    memory = MemoryLeases(kube)  # type: ignore[arg-type]
    run = executor(kube, memory)
    run.run([RememberDemand(learned), RememberBackoff(FAILING)])
    (create, patch) = kube.writes
    assert create[3]["metadata"]["annotations"] == {DEMAND: encode_demand(learned)}
    assert patch[3] == {"metadata": {"annotations": {BACKOFF: encode(FAILING)}}}
    assert remembered(memory.read(SET) or {})["demand"] == learned  # kept beside the backoff
    fresh = MemoryLeases(kube)  # type: ignore[arg-type]
    assert remembered(fresh.read(SET) or {})["demand"] == learned  # a new leader starts here
    cluster_wide = RecordingKube()
    executor(cluster_wide, None).run([RememberDemand(learned)])
    change = {"metadata": {"annotations": {DEMAND: encode_demand(learned)}}}
    assert cluster_wide.writes == [("patch", EXPORTERSETS, "pool", change)]
    annotated = {
        **SET,
        "metadata": {**SET["metadata"], "annotations": change["metadata"]["annotations"]},
    }
    assert pool_view(annotated)[0].demand == learned
