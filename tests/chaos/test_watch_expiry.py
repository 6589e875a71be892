"""Watches that resume into 410 Gone: the apiserver is killed, etcd's history moves on and
is compacted, the apiserver comes back. Every cache lists again; the pool stays as it
was, and nothing is deleted because a cache was briefly empty. Jumpstarter's released 0.9.0
controller issues the credentials and runs through the outage without being restarted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import running_reconciler
from tests.chaos.support import identity, metric, names, until
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class

RELISTS = "virtualtarget_reconciler_informer_relists_total"


def uids(plane: ControlPlane, resource: str, ns: str) -> dict[str, str]:
    items: list[dict[str, Any]] = get_json(plane, resource, "-n", ns)["items"]
    return {i["metadata"]["name"]: i["metadata"]["uid"] for i in items}


def test_expired_watches_relist_and_the_pool_is_untouched(
    plane: ControlPlane,
    namespace: str,
    jumpstarter: Jumpstarter,
    tmp_path: Path,
    recovery: Callable[[str, float], None],
) -> None:
    ns = namespace
    user = f"system:serviceaccount:{ns}:reconciler"
    kubeconfig = identity(plane, ns, "reconciler", tmp_path)
    apply(plane, virtual_target_class("qemu", ns))
    apply(plane, exporter_set("pool", ns, class_name="qemu", with_template=True, minReplicas=3))
    extra = ["--namespace", ns, "--no-leader-election"]
    with running_reconciler(plane, tmp_path, kubeconfig=kubeconfig, extra=extra) as reconciler:
        until("three instances with Pods", lambda: len(names(plane, "pods", ns)) == 3, 60)
        expected = names(plane, "exporters", ns)
        assert names(plane, "pods", ns) == expected
        configs = [f"exporter-config-{n}" for n in expected]
        until(
            "their config Secrets",
            lambda: set(configs) <= set(names(plane, "secrets", ns)),
            60,
        )
        before = {r: uids(plane, r, ns) for r in ("exporters", "pods", "secrets")}
        url = f"{reconciler.metrics_url}/metrics"
        relists = metric(url, plane.token, RELISTS)
        events_before = len(plane.audit_events())

        plane.kill("kube-apiserver")
        plane.advance_etcd(50)  # history the resumed watches never saw ...
        plane.compact_etcd()  # ... and cannot be served any more: 410 Gone
        started = time.monotonic()
        plane.restart("kube-apiserver")
        watched = 7  # every resource the reconciler lists and watches
        until(
            "every cache listed again",
            lambda: metric(url, plane.token, RELISTS) >= relists + watched,
            60,
        )
        recovery("all 7 caches relisted after 410 Gone", time.monotonic() - started)
        time.sleep(3)  # passes over the relisted caches

        assert {r: uids(plane, r, ns) for r in before} == before  # same objects, same uids
        deletes = [
            e
            for e in plane.audit_events()[events_before:]
            if e["user"]["username"] == user and e["verb"] == "delete"
        ]
        assert deletes == []
        reconciler.check_alive()
        jumpstarter.check_alive()
