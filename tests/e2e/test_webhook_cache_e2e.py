"""The webhook's set cache may lag the apiserver by a watch event. A class whose cached
users were deleted a moment before is not refused on the cache's word: "in use" is read
again live, and only a set that the apiserver still has keeps its class."""

from __future__ import annotations

import asyncio

from harness.controlplane import ControlPlane
from tests.e2e.objects import apply, exporter_set, virtual_target_class
from webhook.cache import ClusterCache


def _stale_cache(plane: ControlPlane) -> ClusterCache:
    """A cache listed once and never watched: it keeps whatever is deleted after."""
    cache = ClusterCache(plane.api_client())
    for kind_cache in cache.caches.values():
        kind_cache._list()  # the list a running cache starts with
    return cache


def test_a_set_deleted_after_the_cache_listed_it_no_longer_holds_its_class(
    control_plane: ControlPlane, namespace: str
) -> None:
    apply(control_plane, virtual_target_class("qemu", namespace))
    apply(control_plane, exporter_set("gone", namespace, class_name="qemu", with_template=True))
    apply(control_plane, exporter_set("kept", namespace, class_name="qemu", with_template=True))
    cache = _stale_cache(control_plane)
    assert sorted(asyncio.run(cache.sets_using_class(namespace, "qemu", 5.0))) == ["gone", "kept"]

    control_plane.kubectl("delete", "exporterset", "gone", "-n", namespace)
    assert len(cache.caches["ExporterSet"].values_in(namespace)) == 2  # still stale
    assert asyncio.run(cache.sets_using_class(namespace, "qemu", 5.0)) == ["kept"]

    control_plane.kubectl("delete", "exporterset", "kept", "-n", namespace)
    assert asyncio.run(cache.sets_using_class(namespace, "qemu", 5.0)) == []
