"""Admission of what a pool will be, through kube-apiserver with its real limits: the
webhook refuses a set whose instance the apiserver could never store, exactly where the
apiserver itself starts refusing the rendered objects; a class change likewise; it warns
about overlapping sets and names a deleted set's leased instances.

The leased instance is leased for real: Jumpstarter's released 0.9.0 controller serves
that test's namespace, the instances' exporters (the release's `jmp run`,
`tests.exporters`) register with it, and the release's client asks for a Lease pinned to
one of them (`jmp create lease --name`); the controller assigns it and names it in that
Exporter's `status.leaseRef`.

The rendered objects are posted as the reconciler would post them (`webhook.pools`
renders them with the reconciler's own code): the apiserver, not a number in this
project, says where the limits are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import WebhookServer, running_reconciler
from pool.model.keys import instance_selector
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    try_apply,
    virtual_target_class,
    wait_for,
)
from tests.exporters import DRIVERS, ExporterProcesses
from tests.unit.test_webhook_pools import QEMU_DRIVERS, at_config_size, blob_set, deep_drivers
from webhook.pools import REQUEST_LIMIT, SECRET_DATA_LIMIT, render_instance

Obj = dict[str, Any]


def create(plane: ControlPlane, body: Obj) -> Any:
    """`kubectl create` (a large set does not fit `apply`'s last-applied annotation)."""
    return plane.kubectl("create", "-f", "-", input=json.dumps(body), check=False)


def names_of(plane: ControlPlane, ns: str, selector: str) -> list[str]:
    """The Exporters `selector` selects, not being deleted, by name."""
    items = get_json(plane, "exporters", "-n", ns, "-l", selector)["items"]
    return sorted(
        e["metadata"]["name"] for e in items if not e["metadata"].get("deletionTimestamp")
    )


def lease_ref(plane: ControlPlane, ns: str, exporter: str) -> str:
    """The Lease Jumpstarter's controller names in the Exporter's status.leaseRef ('')."""
    status = get_json(plane, "exporter", exporter, "-n", ns).get("status") or {}
    return str((status.get("leaseRef") or {}).get("name") or "")


def rendered_secret(exporter_set: Obj, klass: Obj) -> Obj:
    rendered = render_instance(exporter_set, klass)
    assert rendered is not None
    return rendered.secret


@pytest.fixture
def klass(control_plane: ControlPlane, webhook: WebhookServer, namespace: str) -> Obj:
    """The class `qemu` of the test's namespace, created."""
    body = virtual_target_class("qemu", namespace)
    assert create(control_plane, body).returncode == 0
    return body


def test_the_webhook_refuses_exactly_what_the_apiserver_would_not_store(
    control_plane: ControlPlane, klass: Obj, namespace: str
) -> None:
    plane, ns = control_plane, namespace
    fits = at_config_size(SECRET_DATA_LIMIT, klass, name="fits", namespace=ns)
    over = at_config_size(SECRET_DATA_LIMIT + 1, klass, name="over", namespace=ns)
    # The apiserver stores the config Secret of the one and refuses the other's.
    stored = create(plane, rendered_secret(fits, klass))
    assert stored.returncode == 0, stored.stderr
    refused = create(plane, rendered_secret(over, klass))
    assert "data: Too long: may not be more than 1048576 bytes" in refused.stderr
    # The webhook admits the one and refuses the other, saying why.
    assert create(plane, fits).returncode == 0
    result = create(plane, over)
    assert result.returncode == 1
    assert result.stderr == (
        'The ExporterSet "over" is invalid: spec.template.spec.drivers: Too long: an instance '
        "would get a config.yaml of 1048577 bytes, more than a Secret holds (1048576 bytes); "
        'largest driver configs: drivers[63] "d63" 30853 bytes, drivers[62] "d62" 16076 bytes, '
        'drivers[61] "d61" 16076 bytes\n'
    ), result.stderr


def test_a_config_beyond_the_request_limit_is_refused_with_both_limits(
    control_plane: ControlPlane, klass: Obj, namespace: str
) -> None:
    plane, ns = control_plane, namespace
    deep = blob_set([], name="deep", namespace=ns, first=tuple(deep_drivers(40)))
    secret = rendered_secret(deep, klass)
    assert len(json.dumps(secret)) > REQUEST_LIMIT
    too_large = create(plane, secret)
    assert f"limit is {REQUEST_LIMIT}" in too_large.stderr, too_large.stderr
    result = create(plane, deep)
    assert result.returncode == 1
    assert "more than the apiserver accepts (3145728 bytes)" in result.stderr, result.stderr


def test_a_class_change_that_would_push_a_set_over_is_refused(
    control_plane: ControlPlane, klass: Obj, namespace: str
) -> None:
    plane, ns = control_plane, namespace
    near = at_config_size(SECRET_DATA_LIMIT - 200, klass, namespace=ns, first=QEMU_DRIVERS)
    assert create(plane, near).returncode == 0
    sized = virtual_target_class(
        "qemu",
        ns,
        parameters={"resources": {"cpu": 4, "memory": "4Gi"}, "storage": {"size": "16Gi"}},
    )
    result = try_apply(plane, sized)
    assert result.returncode == 1
    assert (
        'spec.template.spec.drivers: Too long: ExporterSet "pool-a": an instance would get a '
        "config.yaml of "
    ) in result.stderr, result.stderr
    assert get_json(plane, "virtualtargetclass", "qemu", "-n", ns)["spec"].get("parameters") is None


def test_overlapping_sets_are_admitted_with_a_warning(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    plane, ns = control_plane, namespace
    apply(plane, virtual_target_class("qemu", ns))
    shared = {"jumpstarter.dev/pool": "poolA"}
    first = exporter_set("first", ns, class_name="qemu", labels=shared, with_template=True)
    assert try_apply(plane, first).stderr == ""
    second = exporter_set("second", ns, class_name="qemu", labels=shared, with_template=True)
    result = try_apply(plane, second)
    assert result.returncode == 0
    assert result.stderr == (
        'Warning: selector overlaps ExporterSet "first": a pending Lease both match is counted '
        'by the older set, "first"\n'
    )


def test_deleting_a_set_names_its_leased_instances(
    control_plane: ControlPlane,
    webhook: WebhookServer,
    ns: str,
    jumpstarter: Jumpstarter,
    exporters: ExporterProcesses,
    tmp_path: Path,
) -> None:
    plane = control_plane
    apply(plane, virtual_target_class("qemu", ns))
    body = exporter_set(
        "p4", ns, class_name="qemu", with_template=True, minReplicas=2, maxReplicas=2
    )
    body["spec"]["template"]["spec"] = {"drivers": DRIVERS}
    apply(plane, body)
    extra = ["--namespace", ns, "--no-leader-election"]
    with running_reconciler(plane, tmp_path, extra=extra) as reconciler:
        pool = instance_selector("p4")
        wait_for("two instances", lambda: len(names_of(plane, ns, pool)) == 2)
        leased, idle = names_of(plane, ns, pool)
        # One instance leased for real: its exporter registered, Jumpstarter's controller
        # assigns it the Lease pinned to it and names the Lease in its status.leaseRef.
        jumpstarter.request_lease("pool=p4", "lease-4", exporter=leased)
        wait_for(
            f"{leased} serving lease-4",
            lambda: lease_ref(plane, ns, leased) == "lease-4",
            timeout=90,
        )
        assert lease_ref(plane, ns, idle) == ""
        result = plane.kubectl("delete", "exporterset", "p4", "-n", ns)
        reconciler.check_alive()
    assert result.stderr == (
        f"Warning: instance {leased} serves lease lease-4: it stays until that ends, then goes\n"
    )
    assert result.stdout == (
        f'exporterset.virtualtarget.jumpstarter.dev "p4" deleted from {ns} namespace\n'
    )
