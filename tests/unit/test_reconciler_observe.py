"""The planner's Observation of one set, assembled from cache contents alone
(`reconciler.runtime.observe`): no thread, no apiserver (a client that any call fails)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bench.reconciler import exporter, exporter_set, pod
from pool.model.access import (
    CLASSES,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    NODES,
    PODS,
    SECRETS,
)
from pool.model.keys import SURPLUS_SINCE
from pool.model.nodes import GONE
from pool.model.reasons import CLASS_NOT_FOUND, INVALID_PARAMETERS
from pool.rendering.provisioners import provisioner
from reconciler.runtime.caches import build_caches
from reconciler.runtime.claims import Claims
from reconciler.runtime.credentials import InstanceCredentials
from reconciler.runtime.expectations import EXPORTER, POD_DELETED, Expectations
from reconciler.runtime.observe import Observed, Observer
from reconciler.runtime.scope import Scope

NS, SET = "lab", "pool"
SET_UID = f"set-{NS}-{SET}"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class NoApi:
    """Any call to the apiserver fails the test: observing reads the caches only."""

    mode = ""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the observation called the API: {name}")


class Memory:
    """The pool memory as `MemoryReader` hands it over: annotations by set uid."""

    def __init__(self, held: dict[str, dict[str, str]]) -> None:
        self.held = held

    def read(self, exporter_set: dict[str, Any]) -> dict[str, str] | None:
        return self.held.get(exporter_set["metadata"]["uid"])


def _observer(scope: Scope, memory: Memory | None = None) -> tuple[Observer, Claims]:
    caches = build_caches(NoApi(), scope, 60.0, 10.0)  # type: ignore[arg-type]
    claims = Claims(caches.watches[JUMPSTARTER_LEASES])
    observer = Observer(
        provisioner("qemu.jumpstarter.dev"),
        caches.watches,
        claims,
        InstanceCredentials(caches.watches, caches.secrets),
        Expectations(),
        {},
        live=NoApi(),
        memory=memory,
    )
    return observer, claims


def _class(name: str = "qemu", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"provisioner": "qemu.jumpstarter.dev", **spec},
    }


def _filled(observer: Observer, claims: Claims, kinds: list[str]) -> dict[str, Any]:
    """The set, its class, its Exporters of `kinds` and their Pods in the caches."""
    watches = observer.watches
    the_set = exporter_set(NS, SET, warm=len(kinds))
    watches[EXPORTERSETS].apply("ADDED", the_set)
    claims.update((NS, SET), the_set)
    watches[CLASSES].apply("ADDED", _class())
    for index, kind in enumerate(kinds):
        made = exporter(NS, SET, SET_UID, index, kind)
        watches[EXPORTERS].apply("ADDED", made)
        watches[PODS].apply("ADDED", pod(NS, SET, made))
    return the_set


def _observed(observer: Observer, the_set: dict[str, Any]) -> Observed:
    found = observer.observe(the_set)
    assert isinstance(found, Observed), found
    return found


def test_a_set_is_observed_from_its_caches_alone() -> None:
    observer, claims = _observer(Scope((NS,)))
    the_set = _filled(observer, claims, ["available", "busy"])
    pending = {"metadata": {"name": "asked", "namespace": NS},
               "spec": {"selector": {"matchLabels": {"board": SET}}}}  # fmt: skip
    observer.watches[JUMPSTARTER_LEASES].apply("ADDED", pending)
    rival = {**exporter_set(NS, "rival", warm=1), "spec": {
        **exporter_set(NS, "rival", warm=1)["spec"],
        "template": {"metadata": {"labels": {"board": SET}}}}}  # fmt: skip
    claims.update((NS, "rival"), rival)
    observed = _observed(observer, the_set)
    seen = observed.observation
    assert sorted(e.name for e in seen.exporters) == [f"{SET}-0", f"{SET}-1"]
    assert sorted(p.name for p in seen.pods) == [f"{SET}-0", f"{SET}-1"]
    assert [lease.name for lease in seen.leases] == ["asked"]
    assert [r.name for r in seen.rivals] == ["rival"]
    assert seen.problem is None and seen.klass is not None and seen.images is None
    # no Secret cached: each instance waits for its credentials, and says why
    assert set(seen.awaiting) == {f"{SET}-0", f"{SET}-1"} == set(observed.credentials)
    assert seen.lost_nodes == {}  # a namespaced install reads no Nodes
    assert SECRETS not in observer.watches or len(observer.watches[SECRETS]) == 0


def test_the_pods_this_process_deleted_are_terminating_and_its_creates_expected() -> None:
    observer, claims = _observer(Scope((NS,)))
    the_set = _filled(observer, claims, ["available"])
    observer.expectations.expect((NS, SET), POD_DELETED, f"pod-{NS}-{SET}-0")
    observer.expectations.expect((NS, SET), EXPORTER, "pool-new")
    seen = _observed(observer, the_set).observation
    assert [p.deleting for p in seen.pods] == [True]
    assert seen.expected_exporters == frozenset({"pool-new"})


def test_a_create_the_cache_shows_mid_observation_is_counted_once() -> None:
    """The cache may show a create between the read of the set's Exporters and the
    expectations' check (a KubeVirt pool's remote reads widen that window): the create
    is then in neither `exporters` nor `expected_exporters` unless both come from one
    snapshot, and the pass creates the instance again (seen on a node: 4 for 3)."""
    observer, claims = _observer(Scope((NS,)))
    the_set = _filled(observer, claims, ["available"])
    arriving = exporter(NS, SET, SET_UID, 1, "provisioning")
    observer.expectations.expect((NS, SET), EXPORTER, arriving["metadata"]["name"])
    read_pods = observer.pods

    def pods_then_the_create_arrives(key: Any) -> Any:
        found = read_pods(key)
        observer.watches[EXPORTERS].apply("ADDED", arriving)
        return found

    observer.pods = pods_then_the_create_arrives  # type: ignore[method-assign]
    seen = _observed(observer, the_set).observation
    names = {e.name for e in seen.exporters} | seen.expected_exporters
    assert names == {f"{SET}-0", arriving["metadata"]["name"]}
    # the next pass reads it from the cache and expects it no more
    observer.pods = read_pods  # type: ignore[method-assign]
    again = _observed(observer, the_set).observation
    assert {e.name for e in again.exporters} == names and not again.expected_exporters


def test_the_memory_is_read_beside_the_set() -> None:
    since = "2026-01-01T00:00:00Z"
    observer, claims = _observer(Scope((NS,)), Memory({SET_UID: {SURPLUS_SINCE: since}}))
    the_set = _filled(observer, claims, [])
    seen = _observed(observer, the_set).observation
    assert seen.pool.surplus_since == T0


def test_a_missing_class_and_unusable_parameters_are_problems() -> None:
    observer, claims = _observer(Scope((NS,)))
    the_set = _filled(observer, claims, [])
    observer.watches[CLASSES].apply("DELETED", _class())
    assert _observed(observer, the_set).observation.problem == (
        CLASS_NOT_FOUND, f'VirtualTargetClass "qemu" not found in namespace "{NS}"')  # fmt: skip
    observer.watches[CLASSES].apply("ADDED", _class(parameters={"arch": "pdp11"}))
    problem = _observed(observer, the_set).observation.problem
    assert problem is not None and problem[0] == INVALID_PARAMETERS


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, "being deleted"),
        ({"class": "other.example.com"}, "its class names provisioner other.example.com"),
    ],
)
def test_a_set_that_is_not_this_process_s_is_not_observed(change: dict[str, Any], why: str) -> None:
    observer, claims = _observer(Scope((NS,)))
    the_set = _filled(observer, claims, [])
    if "class" in change:
        observer.watches[CLASSES].apply("MODIFIED", _class(provisioner=change["class"]))
    else:
        the_set = {**the_set, "metadata": {**the_set["metadata"], **change["metadata"]}}
    found = observer.observe(the_set)
    assert isinstance(found, str) and found.startswith(why)


def test_a_cluster_wide_install_sees_the_lost_nodes_under_its_pods() -> None:
    observer, claims = _observer(Scope())
    the_set = _filled(observer, claims, ["available", "available"])
    nodes, pods = observer.watches[NODES], observer.watches[PODS]
    for index, node in enumerate(("node-a", "node-b")):
        placed = pod(NS, SET, exporter(NS, SET, SET_UID, index, "available"))
        pods.apply("MODIFIED", {**placed, "spec": {**placed["spec"], "nodeName": node}})
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    nodes.apply("ADDED", {"metadata": {"name": "node-a"}, **ready})
    nodes.synced.set()  # as its first list does: a node missing from it is gone
    assert _observed(observer, the_set).observation.lost_nodes == {"node-b": GONE}
