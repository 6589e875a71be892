"""Secrets read by name (a cluster-wide install): which names are read, and when.

The cache reads a name at once when it is first tracked, when it is urged or confirmed
before use, keeps the answers to its own writes, and otherwise leaves the name to the
budgeted resync (`reconciler.runtime.readschedule`); the controller tracks an instance's two
Secrets once its credentials are issued and reads them again right before its Pod is
created. All on a virtual clock; no server.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from bench.reconciler import CountingKube, exporter, exporter_set
from pool.model.access import CLASSES, EXPORTERS, EXPORTERSETS, PODS, SECRETS
from pool.rendering.provisioners import provisioner
from reconciler.runtime.cache import Informer
from reconciler.runtime.controller import Controller, Lane
from reconciler.runtime.named import NamedCache
from reconciler.runtime.scope import Scope

NS = "ns-0"


class LiveKube(CountingKube):
    """The counting client, answering GETs from `objects` (what the apiserver holds)."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.gets: list[tuple[str, str]] = []
        self.during_get: Any = None  # called in the middle of a GET (a race)

    def get(self, _resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets.append((namespace, name))
        found = self.objects.get((namespace, name))
        if self.during_get is not None:
            self.during_get()
        return _copy(found) if found is not None else None


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": dict(obj["metadata"]), "data": dict(obj.get("data") or {})}


def _secret(name: str, version: str, token: str = "t") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "resourceVersion": version},
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


def _cache(kube: LiveKube, now: list[float], budget: float = 1.0) -> NamedCache:
    return NamedCache(kube, SECRETS, resync=10, clock=lambda: now[0], budget=budget)  # type: ignore[arg-type]


def test_a_name_is_read_at_once_then_only_by_the_resync_which_sees_a_rotation() -> None:
    kube, now = LiveKube(), [0.0]
    cache = _cache(kube, now)
    events: list[tuple[str, str]] = []
    cache.add_handler(lambda kind, new, _old: events.append((kind, new["metadata"]["name"])))
    kube.objects[(NS, "t")] = _secret("t", "1")
    cache.track(NS, "t")
    cache.track(NS, "absent")
    assert cache.read_due() == 2 and events == [("ADDED", "t")]
    assert cache.get(NS, "t") is not None and cache.get(NS, "absent") is None
    now[0] = 5
    assert cache.read_due() == 0  # nothing says it changed, and the floor is not past
    kube.objects[(NS, "t")] = _secret("t", "2", "rotated")
    now[0] = 10
    assert cache.read_due() == 1  # one resync read: the budget is 1 a second
    now[0] = 11
    assert cache.read_due() == 1
    assert events == [("ADDED", "t"), ("MODIFIED", "t")]
    now[0] = 21
    cache.read_due()  # unchanged: no event
    assert events == [("ADDED", "t"), ("MODIFIED", "t")]
    del kube.objects[(NS, "t")]
    now[0] = 40
    cache.read_due()
    cache.read_due()
    assert events[-1] == ("DELETED", "t") and cache.get(NS, "t") is None


def test_confirm_reads_a_tracked_name_now() -> None:
    kube, now = LiveKube(), [0.0]
    cache = _cache(kube, now)
    kube.objects[(NS, "t")] = _secret("t", "1")
    cache.track(NS, "t")
    cache.read_due()
    kube.objects[(NS, "t")] = _secret("t", "2", "rotated")  # a moment later, no event
    cache.confirm(NS, "t")
    assert kube.gets == [(NS, "t"), (NS, "t")]
    assert (cache.get(NS, "t") or {})["metadata"]["resourceVersion"] == "2"
    cache.confirm(NS, "untracked")
    assert len(kube.gets) == 2


def test_the_answer_to_a_write_is_kept_and_an_older_read_does_not_undo_it() -> None:
    kube, now = LiveKube(), [0.0]
    cache = _cache(kube, now)
    kube.objects[(NS, "c")] = _secret("c", "1")
    cache.track(NS, "c")
    # The write's answer arrives while the read of the state before it is under way.
    kube.during_get = lambda: cache.observed_write(_secret("c", "2", "written"))
    cache.read_due()
    kube.during_get = None
    assert (cache.get(NS, "c") or {})["metadata"]["resourceVersion"] == "2"
    now[0] = 5
    assert cache.read_due() == 0  # the answer counts as a read: nothing due
    cache.observed_write(_secret("untracked", "9"))  # only tracked names are kept
    assert cache.get(NS, "untracked") is None


def test_an_urged_name_is_read_on_the_next_round_whatever_the_budget() -> None:
    kube, now = LiveKube(), [0.0]
    cache = _cache(kube, now, budget=0.001)
    for name in ("a", "b"):
        kube.objects[(NS, name)] = _secret(name, "1")
        cache.track(NS, name)
    cache.read_due()
    kube.gets.clear()
    now[0] = 20
    cache.read_due()  # one resync read, then the budget is spent for 1000 s
    cache.read_due()  # (one more after an idle spell)
    kube.gets.clear()
    now[0] = 21
    cache.urge(NS, "b")
    assert cache.read_due() == 1 and kube.gets == [(NS, "b")]


# -- the controller's part --------------------------------------------------------------


def _pool(controller: Controller, credential: str = "") -> dict[str, Any]:
    """The set `pool` in NS with one available instance (its credential Secret named
    `credential` when given), without a Pod."""
    set_obj = exporter_set(NS, "pool", warm=1, ceiling=2)
    controller.informers[EXPORTERSETS].apply("ADDED", set_obj)
    instance = exporter(NS, "pool", set_obj["metadata"]["uid"], 0, "available")
    if credential:
        instance["status"]["credential"] = {"name": credential}
    else:
        del instance["status"]["endpoint"]
    controller.informers[EXPORTERS].apply("ADDED", instance)
    return instance


def _cluster_wide(kube: CountingKube) -> Controller:
    """A cluster-wide controller with the class `qemu` in NS."""
    controller = Controller(kube, provisioner("qemu.jumpstarter.dev"), scope=Scope())  # type: ignore[arg-type]
    klass = {
        "metadata": {"name": "qemu", "namespace": NS},
        "spec": {"provisioner": "qemu.jumpstarter.dev"},
    }
    controller.watches[CLASSES].apply("ADDED", klass)
    return controller


def test_an_instance_s_two_secrets_are_tracked_once_issued_and_follow_its_status() -> None:
    controller = _cluster_wide(CountingKube())
    named = controller.secrets
    assert isinstance(named, NamedCache)
    instance = _pool(controller)
    hardware = {
        "metadata": {"name": "board", "namespace": NS},
        "status": {"credential": {"name": "x"}},
    }
    controller.watches[EXPORTERS].apply("ADDED", hardware)  # not a pool's: never read
    assert named.tracked() == []  # no credentials yet: nothing renders from them
    issued = {**instance, "status": {**instance["status"], "credential": {"name": "tok-1"}}}
    controller.watches[EXPORTERS].apply("MODIFIED", issued)
    assert sorted(named.tracked()) == [(NS, "exporter-config-pool-0"), (NS, "tok-1")]
    reissued = {**issued, "status": {**issued["status"], "credential": {"name": "tok-2"}}}
    controller.watches[EXPORTERS].apply("MODIFIED", reissued)  # another Secret: read it
    assert sorted(named.tracked()) == [(NS, "exporter-config-pool-0"), (NS, "tok-2")]
    controller.watches[EXPORTERS].apply("DELETED", reissued)
    assert named.tracked() == []


def test_a_pod_about_to_be_created_starts_from_secrets_read_just_before() -> None:
    kube, now = LiveKube(), [0.0]
    controller = _cluster_wide(kube)
    named = controller.secrets
    assert isinstance(named, NamedCache)
    named.clock = lambda: now[0]
    kube.objects[(NS, "tok")] = _secret("tok", "1", "first")
    _pool(controller, credential="tok")
    named.read_due()  # the first read, when the credentials were issued
    assert sorted(kube.gets) == [(NS, "exporter-config-pool-0"), (NS, "tok")]
    kube.objects[(NS, "tok")] = _secret("tok", "2", "rotated")  # no event says so
    now[0] = 1.0
    controller.sync((NS, "pool"), Lane.PODS)  # both read again, right before the Pod
    assert sorted(kube.gets[2:]) == [(NS, "exporter-config-pool-0"), (NS, "tok")]
    pods = [body for resource, body in kube.created if resource is PODS]
    assert len(pods) == 1
    config = next(body for resource, body in kube.created if resource is SECRETS)
    assert b"token: rotated" in base64.b64decode(config["data"]["config.yaml"])
    assert kube.created.index((SECRETS, config)) < kube.created.index((PODS, pods[0]))


def test_stored_objects_share_their_keys_and_short_strings() -> None:
    informer = Informer(None, SECRETS)  # type: ignore[arg-type]
    for index in range(2):  # decoded apart, as two watch events are
        text = json.dumps({"metadata": {"name": f"s{index}", "namespace": "lab"}, "data": {}})
        informer.apply("ADDED", json.loads(text))
    first, second = (obj["metadata"] for obj in informer.items())
    assert first["namespace"] is second["namespace"]
    assert next(iter(first)) is next(iter(second))  # the key "name"
