"""Admission works out what a set's pool would be with the reconciler's own rendering: an
instance the apiserver could never store is refused, a class change that would make one
so likewise; overlapping sets and a deletion's leased instances get warnings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from api.fielderrors import ErrorType
from pool.model.keys import SET_LABEL
from tests.unit.test_webhook_crossobject import run
from tests.unit.test_webhook_support import a_class, a_set, review, schema_source
from webhook.admission import Admission
from webhook.clusterview import ClusterUnavailable, StaticView
from webhook.pools import (
    ANNOTATIONS_LIMIT,
    REQUEST_LIMIT,
    SECRET_DATA_LIMIT,
    leased_instances,
    render_instance,
    storable_errors,
)

Obj = dict[str, Any]
MOCK = "jumpstarter_driver_power.driver.MockPower"
DRIVERS = 64  # the CRD's maxItems
QEMU_DRIVERS = tuple(
    {"name": f"vm{i}", "type": "jumpstarter_driver_qemu.driver.Qemu"} for i in range(20)
)


def blob_set(
    sizes: list[int],
    name: str = "pool-a",
    namespace: str = "lab",
    first: tuple[Obj, ...] = (),
    **spec: Any,
) -> Obj:
    """A set whose drivers (after `first`) each carry a config string of the given size;
    its selector and template labels name it, so sets of two names do not overlap."""
    drivers = [*first] + [
        {"name": f"d{i}", "type": MOCK, "config": {"blob": "x" * size}}
        for i, size in enumerate(sizes)
    ]
    exporter_set = a_set(**spec)
    exporter_set["metadata"].update(name=name, namespace=namespace)
    exporter_set["spec"]["selector"] = {"matchLabels": {"pool": name}}
    exporter_set["spec"]["template"] = {
        "metadata": {"labels": {"pool": name}},
        "spec": {"drivers": drivers},
    }
    return exporter_set


def deep_drivers(count: int) -> list[Obj]:
    """Drivers whose config nests 150 levels deep: its YAML, indented at every level,
    is over twice the size of its JSON (40 of them render beyond 3 MiB of request)."""
    nested: Any = "leaf"
    for _ in range(150):
        nested = {"level": nested, "pad": "p" * 200}
    return [{"name": f"n{i}", "type": MOCK, "config": nested} for i in range(count)]


def config_bytes(exporter_set: Obj, klass: Obj) -> int:
    rendered = render_instance(exporter_set, klass)
    assert rendered is not None
    return len(rendered.config.encode())


def at_config_size(target: int, klass: Obj, **fields: Any) -> Obj:
    """A set of 64 drivers at most (the CRD's limit), the last one sized so that the
    rendered config.yaml is exactly `target` bytes (one more character, one more byte);
    `fields` as `blob_set` takes them."""
    count = DRIVERS - len(fields.get("first", ()))
    share = target // count - 400
    base = config_bytes(blob_set([share] * (count - 1) + [1], **fields), klass)
    exporter_set = blob_set([share] * (count - 1) + [1 + target - base], **fields)
    assert config_bytes(exporter_set, klass) == target
    return exporter_set


def test_a_config_a_secret_can_hold_is_admitted_one_byte_more_is_not() -> None:
    klass = a_class()
    assert storable_errors(at_config_size(SECRET_DATA_LIMIT, klass), klass) == []
    too_big = at_config_size(SECRET_DATA_LIMIT + 1, klass)
    [error] = storable_errors(too_big, klass)
    assert error.type is ErrorType.TOO_LONG and error.field == "spec.template.spec.drivers"
    text = str(error)
    assert text.startswith(
        "spec.template.spec.drivers: Too long: an instance would get a config.yaml of 1048577 "
        "bytes, more than a Secret holds (1048576 bytes); largest driver configs: drivers["
    )
    assert text.count(" bytes, drivers[") == 2  # the three largest, with their sizes


def test_a_deeply_nested_config_names_the_request_limit_too() -> None:
    exporter_set = a_set()
    exporter_set["spec"]["template"]["spec"] = {"drivers": deep_drivers(30)}
    rendered = render_instance(exporter_set, a_class())
    assert rendered is not None
    assert len(json.dumps(rendered.secret)) > REQUEST_LIMIT
    [error] = storable_errors(exporter_set, a_class())
    assert "more than the apiserver accepts (3145728 bytes)" in str(error)


def test_annotations_the_apiserver_would_refuse_are_refused() -> None:
    exporter_set = a_set()
    exporter_set["spec"]["template"]["metadata"]["annotations"] = {
        "example.com/note": "n" * ANNOTATIONS_LIMIT
    }
    [error] = storable_errors(exporter_set, a_class())
    assert error.field == "spec.template.metadata.annotations"
    assert "more than the apiserver stores (262144 bytes)" in str(error)


def test_an_unknown_provisioner_is_not_rendered() -> None:
    klass = a_class(provisioner="other.example.com")
    assert storable_errors(at_config_size(SECRET_DATA_LIMIT + 1, a_class()), klass) == []


def test_admission_refuses_the_set_and_a_class_change_that_pushes_it_over() -> None:
    plain = a_class()
    sized = a_class(
        parameters={"resources": {"cpu": 4, "memory": "4Gi"}, "storage": {"size": "16Gi"}}
    )
    # Qemu drivers: the class's resources fill each one's config, so the class moves the size.
    at_limit = at_config_size(SECRET_DATA_LIMIT, plain, first=QEMU_DRIVERS)
    assert config_bytes(at_limit, sized) > SECRET_DATA_LIMIT
    admission = Admission(schema_source, StaticView([plain, at_limit]))
    assert run(admission, review(at_limit)).allowed
    changed = run(admission, review(sized, operation="UPDATE", old=plain))
    assert not changed.allowed
    [error] = changed.errors
    assert str(error).startswith(
        'spec.template.spec.drivers: Too long: ExporterSet "pool-a": an instance would get a '
        "config.yaml of "
    )
    refused = run(Admission(schema_source, StaticView([sized])), review(at_limit))
    assert not refused.allowed


def _set(name: str, labels: Mapping[str, str], created: str, **selector: str) -> Obj:
    exporter_set = a_set(
        selector={"matchLabels": dict(selector or labels)},
        template={"metadata": {"labels": dict(labels)}},
    )
    exporter_set["metadata"].update(name=name, creationTimestamp=created)
    return exporter_set


def test_overlapping_sets_are_warned_about_naming_the_set_that_counts_a_lease() -> None:
    older = _set(
        "pool-old", {"jumpstarter.dev/pool": "poolA", "arch": "x86"}, "2026-01-01T00:00:00Z"
    )
    apart = _set("pool-c", {"jumpstarter.dev/pool": "poolC"}, "2026-01-01T00:00:00Z")
    newer = _set("pool-new", {"jumpstarter.dev/pool": "poolA"}, "2026-01-02T00:00:00Z")
    outcome = run(Admission(schema_source, StaticView([a_class(), older, apart])), review(newer))
    assert outcome.allowed
    assert outcome.warnings == [
        'selector overlaps ExporterSet "pool-old": a pending Lease both match is counted by '
        'the older set, "pool-old"'
    ]
    fresh = _set("pool-new", {"jumpstarter.dev/pool": "poolA"}, "")
    del fresh["metadata"]["creationTimestamp"]  # being created: the newest
    assert run(Admission(schema_source, StaticView([a_class(), older])), review(fresh)).warnings


def _exporter(name: str, set_uid: str, lease_ref: str = "") -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "lab",
            "labels": {SET_LABEL: "pool-a"},
            "ownerReferences": [{"kind": "ExporterSet", "uid": set_uid, "controller": True}],
        },
        "status": {"leaseRef": {"name": lease_ref}} if lease_ref else {},
    }


class Instances(StaticView):
    """A view whose namespace holds the given Exporters and Leases (or cannot be read)."""

    def __init__(self, exporters: list[Obj], leases: list[Obj], down: bool = False) -> None:
        super().__init__([])
        self.found, self.down = (exporters, leases), down

    async def pool_instances(
        self, namespace: str, set_name: str, budget: float
    ) -> tuple[list[Obj], list[Obj]]:
        if self.down:
            raise ClusterUnavailable("apiserver did not answer within 1.0s")
        return self.found


def test_deleting_a_set_names_its_leased_instances_and_is_never_refused() -> None:
    exporter_set = a_set()
    exporter_set["metadata"]["uid"] = "set-1"
    exporters = [
        _exporter("pool-a-aaaaa", "set-1", lease_ref="lease-4"),
        _exporter("pool-a-bbbbb", "set-1"),
        _exporter("pool-a-ccccc", "set-1"),
        _exporter("pool-a-ddddd", "earlier-set", lease_ref="lease-9"),  # not this set's
    ]
    leases = [
        {"metadata": {"name": "lease-5"}, "status": {"exporterRef": {"name": "pool-a-bbbbb"}}},
        {
            "metadata": {"name": "lease-1"},
            "status": {"exporterRef": {"name": "pool-a-ccccc"}, "ended": True},
        },
    ]
    assert leased_instances(exporter_set, exporters, leases) == [
        ("pool-a-aaaaa", "lease lease-4"),
        ("pool-a-bbbbb", "lease lease-5"),
    ]
    deletion = review(None, operation="DELETE", old=exporter_set)
    outcome = run(Admission(schema_source, Instances(exporters, leases)), deletion)
    assert outcome.allowed
    assert outcome.warnings == [
        "instance pool-a-aaaaa serves lease lease-4: it stays until that ends, then goes",
        "instance pool-a-bbbbb serves lease lease-5: it stays until that ends, then goes",
    ]
    down = run(Admission(schema_source, Instances([], [], down=True)), deletion)
    assert down.allowed
    assert down.warnings == ["leased instances not checked: apiserver did not answer within 1.0s"]


@pytest.mark.parametrize("count", [6, 9])
def test_many_leased_instances_are_summed_up(count: int) -> None:
    exporters = [_exporter(f"pool-a-{i:05d}", "", lease_ref=f"l{i}") for i in range(count)]
    deletion = review(None, operation="DELETE", old=a_set())
    outcome = run(Admission(schema_source, Instances(exporters, [])), deletion)
    assert len(outcome.warnings) == 6
    assert outcome.warnings[-1] == (f"and {count - 5} more leased instance(s), each kept as well")


class SetsUnreadable(StaticView):
    async def sets_of(self, namespace: str, budget: float) -> list[Obj]:
        raise ClusterUnavailable("apiserver did not answer within 1.0s")


def test_a_class_review_while_the_sets_cannot_be_read_is_admitted_with_a_warning() -> None:
    outcome = run(Admission(schema_source, SetsUnreadable([])), review(a_class()))
    assert outcome.allowed
    assert outcome.warnings == [
        "sets using the class not checked: apiserver did not answer within 1.0s"
    ]


def test_a_class_requesting_more_ephemeral_storage_than_the_disk_limits_is_refused() -> None:
    """The emptyDir disk limits the container that runs QEMU to its size where the class
    names no limit: a larger request would make a Pod the apiserver refuses."""
    greedy = a_class(scheduling={"resources": {"requests": {"ephemeral-storage": "30Gi"}}})
    [error] = storable_errors(a_set(), greedy)
    assert str(error) == (
        'spec.parameters.storage: Invalid value: "30Gi": an instance\'s container "exporter" '
        "would request 30Gi of ephemeral-storage, above its limit 11Gi (the guest's disk, size "
        "and fsOverhead, where the class's scheduling.resources name no limit)"
    )
    sized = a_set(parameters={"storage": {"size": "30Gi"}})
    assert storable_errors(sized, greedy) == []
    on_a_claim = a_set(parameters={"storage": {"storageClassName": "local-disks"}})
    assert storable_errors(on_a_claim, greedy) == []
