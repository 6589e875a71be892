"""This product dropped in for Jumpstarter's exporter-set controller, on Jumpstarter's own
ExporterSet and VirtualTargetClass CRDs (main's, as its operator installs them, from the
build of main `make jumpstarter` makes) beside the release's `jumpstarter.dev` CRDs.

`exporter-set-controller` runs with the arguments, the Role and the ServiceAccount main's
operator gives it (`tests.dropin`, which tests/node/test_main_operator.py checks against
what the real operator renders), and `NAMESPACE`, the probe on a loopback port. Jumpstarter's
released 0.9.0 controller serves that namespace and another one, issuing the credentials
there. The pool in that namespace fills, scales down through the scale subresource (which
maps to maxReplicas in Jumpstarter's CRD) with its cooldown remembered in a Lease (the Role
allows no write to the set), and a pool in another namespace is left alone; the probes
answer and the log holds no refusal. The webhook, registered from `deploy/`, defaults and
denies on Jumpstarter's CRDs as on ours.
"""

from __future__ import annotations

import contextlib
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import install_crds, running_jumpstarter
from harness.jumpstarter_main import install_crds as install_main_crds
from harness.stack import (
    ChildProcess,
    register_webhooks,
    running_webhook,
    served_url,
    unregister_webhooks,
)
from pool.model.reasons import SCALE_DOWN, SCALE_UP
from reconciler.runtime.leader import election_id
from reconciler.runtime.memory import lease_name
from scrape.serving import SERVING_PROBES
from tests.dropin import OPERATOR_ARGS, PROVISIONER, operator_account
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    patch_spec,
    set_status,
    surplus_memory,
    try_apply,
    virtual_target_class,
    wait_for,
)


@pytest.fixture(scope="module")
def jumpstarter_plane() -> Iterator[ControlPlane]:
    """kube-apiserver with Jumpstarter main's two CRDs and its release's CRDs of the
    `jumpstarter.dev` kinds (Exporter, Lease, ...), as a cluster with Jumpstarter has them."""
    with running_control_plane(install_crds=False) as plane:
        install_main_crds(plane)
        install_crds(plane)
        yield plane


def _namespace(plane: ControlPlane, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    plane.kubectl("create", "namespace", name)
    return name


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except urllib.error.URLError:
        return 0


def _names(plane: ControlPlane, kind: str, namespace: str) -> list[str]:
    items = get_json(plane, kind, "-n", namespace)["items"]
    return sorted(
        o["metadata"]["name"] for o in items if not o["metadata"].get("deletionTimestamp")
    )


def test_under_the_operators_role_ours_fills_its_namespace_only(
    jumpstarter_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = jumpstarter_plane
    ns, other = _namespace(plane, "jumpstarter"), _namespace(plane, "elsewhere")
    kubeconfig = operator_account(plane, ns, tmp_path / "operator.kubeconfig")
    for namespace in (ns, other):
        apply(
            plane,
            virtual_target_class("qemu", namespace),
            exporter_set(
                "pool",
                namespace,
                class_name="qemu",
                with_template=True,
                minReplicas=2,
                maxReplicas=3,
                minAvailableReplicas=1,
                scaleDownCooldown="2s",
            ),
        )
    with contextlib.ExitStack() as stack:
        for namespace in (ns, other):  # credentials everywhere: only the scope must fill
            stack.enter_context(running_jumpstarter(plane, namespace, tmp_path / namespace))
        controller = ChildProcess.start(
            "exporter-set-controller",
            [*OPERATOR_ARGS, "--health-probe-bind-address=127.0.0.1:0"],
            tmp_path,
            module="reconciler.exporter_set_controller",
            env={"NAMESPACE": ns, "KUBECONFIG": str(kubeconfig)},
        )
        stack.callback(controller.stop)
        probes = served_url(Path(controller.log.name), SERVING_PROBES, "http", controller.popen)

        def filled() -> bool:
            controller.check_alive()
            status = set_status(plane, ns)
            return (
                status.get("replicas") == 2
                and len(_names(plane, "pods", ns)) == 2
                and len(
                    [s for s in _names(plane, "secrets", ns) if s.startswith("exporter-config-")]
                )
                == 2
            )

        wait_for("the pool in NAMESPACE filled", filled)
        assert _status(f"{probes}/readyz") == 200
        assert _status(f"{probes}/healthz") == 200
        election = get_json(plane, "leases.coordination.k8s.io", election_id(PROVISIONER), "-n", ns)
        assert election["spec"]["holderIdentity"]
        # The scale subresource of Jumpstarter's CRD sets maxReplicas: down to one, with
        # the floor and the warm buffer lowered to fit.
        patch_spec(plane, "exporterset", "pool", ns, minReplicas=1, minAvailableReplicas=1)
        plane.kubectl("scale", "exporterset", "pool", "-n", ns, "--replicas=1")
        assert get_json(plane, "exporterset", "pool", "-n", ns)["spec"]["maxReplicas"] == 1
        wait_for("the surplus removed", lambda: len(_names(plane, "exporters", ns)) == 1)
        memory = get_json(plane, "leases.coordination.k8s.io", lease_name("pool"), "-n", ns)
        assert memory["metadata"]["ownerReferences"][0]["name"] == "pool"
        wait_for("the surplus forgotten", lambda: surplus_memory(plane, ns, "pool") == "")
        # The pool in another namespace: nothing created, no status written.
        assert _names(plane, "exporters", other) == []
        assert "status" not in get_json(plane, "exporterset", "pool", "-n", other)
        events = get_json(plane, "events", "-n", ns)["items"]
        # Jumpstarter's reasons for the same events: an Exporter created, a surplus removed.
        assert {SCALE_UP, SCALE_DOWN} <= {e["reason"] for e in events}
        log = controller.log_tail(400)
    assert "forbidden" not in log.lower(), log
    assert " 403" not in log, log
    assert '"level": "info"' in log  # zap's default encoder in production mode: JSON lines


def test_the_webhook_defaults_and_denies_on_jumpstarters_crds(
    jumpstarter_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = jumpstarter_plane
    ns = _namespace(plane, "admission")
    with running_webhook(plane, tmp_path) as server:
        register_webhooks(plane, server)
        try:
            apply(plane, virtual_target_class("lazy", ns, bindingMode="WaitForFirstConsumer"))
            bare = try_apply(plane, exporter_set("bare", ns, class_name="lazy"))
            labelless = exporter_set("labelless", ns, class_name="lazy")
            labelless["spec"]["template"] = {"metadata": {"annotations": {"team": "a"}}}
            filled = try_apply(plane, labelless)
            warm = try_apply(
                plane,
                exporter_set(
                    "warm", ns, class_name="lazy", with_template=True, minAvailableReplicas=2
                ),
            )
            # A rule our CRD carries as CEL and Jumpstarter's does not: the webhook's.
            late = try_apply(
                plane,
                exporter_set(
                    "late", ns, class_name="lazy", with_template=True, scaleDownCooldown="soon"
                ),
            )
            deleted = plane.kubectl("delete", "virtualtargetclass", "lazy", "-n", ns, check=False)
        finally:
            unregister_webhooks(plane)
    # Jumpstarter's CRD requires spec.template, and kubectl checks that before the webhook
    # could fill it; a template without labels gets the selector's.
    assert bare.returncode == 1
    assert 'missing required field "template"' in bare.stderr
    assert filled.returncode == 0, filled.stderr
    spec = get_json(plane, "exporterset", "labelless", "-n", ns)["spec"]
    assert spec["template"]["metadata"]["labels"] == {"pool": "labelless"}
    assert warm.stderr == (
        'The ExporterSet "warm" is invalid: spec.minAvailableReplicas: Invalid value: 2: '
        'must be 0: VirtualTargetClass "lazy" has bindingMode WaitForFirstConsumer, '
        "which keeps no warm instances\n"
    )
    assert late.returncode == 1
    assert late.stderr.startswith(
        'The ExporterSet "late" is invalid: spec.scaleDownCooldown: Invalid value: "soon": '
    ), late.stderr
    assert deleted.stderr == (
        'The VirtualTargetClass "lazy" is invalid: metadata.name: Forbidden: '
        "VirtualTargetClass is in use by ExporterSets labelless; delete or move them first\n"
    )
