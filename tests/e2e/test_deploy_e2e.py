"""The rendered install meets kube-apiserver, and each component does its job with exactly
the permissions its generated RBAC grants.

The webhook and the reconciler run here with ServiceAccount tokens (TokenRequest API) of
the accounts in `deploy/`, not as the admin: a call missing from an `ACCESS` table, and so
from the generated ClusterRoles, fails these tests. The reconciler's pool fills in a
namespace Jumpstarter's released 0.9.0 controller serves: it issues the credentials and
rotates one. The install holds the KubeVirt reconciler's component too, and both
reconcilers run at once with their Deployments' arguments, each leading its own Lease.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from api.access import NAMESPACED
from harness.controlplane import ControlPlane
from harness.deploy_render import (
    WEBHOOK_CONFIGURATION_KINDS,
    WEBHOOK_NAMESPACE,
    container_args,
    render_overlay,
)
from harness.jumpstarter import Jumpstarter
from harness.rbac import RECONCILERS, render_component
from harness.stack import (
    ReconcilerProcess,
    register_webhooks,
    running_reconciler,
    running_webhook,
    unregister_webhooks,
)
from pool.model.access import ACCESS
from reconciler.cli import election_lease
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    rotate_credential,
    try_apply,
    virtual_target_class,
    wait_for,
)
from virtualtarget.cli import _parser_for


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    """The self-signed overlay with the KubeVirt reconciler's component."""
    return render_overlay("self-signed", components=["kubevirt"])


@pytest.fixture(scope="module")
def installed(
    control_plane: ControlPlane, rendered: list[dict[str, Any]]
) -> Iterator[ControlPlane]:
    """Everything `rendered` installs, but the webhook configurations (their Service has no
    endpoints here) which are only dry-run; no controller runs the Deployments."""
    objects = rendered
    configurations = [o for o in objects if o["kind"] in WEBHOOK_CONFIGURATION_KINDS]
    rest = [o for o in objects if o["kind"] not in WEBHOOK_CONFIGURATION_KINDS]
    apply = ("apply", "--server-side", "--force-conflicts", "-f", "-")
    control_plane.kubectl(*apply, input=_as_list(rest))
    dry_run = control_plane.kubectl(
        *apply, "--dry-run=server", input=_as_list(configurations), check=False
    )
    assert dry_run.returncode == 0, dry_run.stderr
    yield control_plane


def _as_list(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def _secret_names(plane: ControlPlane, namespace: str) -> set[str]:
    return {s["metadata"]["name"] for s in get_json(plane, "secrets", "-n", namespace)["items"]}


def _credential_names(plane: ControlPlane, namespace: str) -> set[str]:
    """The credential Secrets Jumpstarter's controller issued the namespace's Exporters."""
    statuses = (
        e.get("status") or {} for e in get_json(plane, "exporters", "-n", namespace)["items"]
    )
    names = ((status.get("credential") or {}).get("name") for status in statuses)
    return {str(name) for name in names if name}


def test_reconciler_works_with_its_service_account(
    installed: ControlPlane, jumpstarter: Jumpstarter, tmp_path: Path
) -> None:
    namespace = jumpstarter.namespace
    # Jumpstarter's own Secrets there (its install's keys, its client's credential).
    jumpstarters_own = _secret_names(installed, namespace)
    kubeconfig = installed.service_account_kubeconfig(
        WEBHOOK_NAMESPACE, "virtualtarget-reconciler", tmp_path / "reconciler.kubeconfig"
    )
    apply(
        installed,
        virtual_target_class("rbac", namespace),
        exporter_set(
            "rbac",
            namespace,
            class_name="rbac",
            with_template=True,
            minReplicas=2,
            minAvailableReplicas=1,
        ),
    )
    with running_reconciler(
        installed,
        tmp_path,
        kubeconfig=kubeconfig,
        extra=[f"--leader-election-namespace={WEBHOOK_NAMESPACE}", "--secret-resync=5"],
    ) as reconciler:

        def status() -> Any:
            reconciler.check_alive()
            pool = get_json(installed, "exporterset", "rbac", "-n", namespace)
            return pool.get("status", {}).get("replicas") == 2

        def instances() -> list[str]:
            reconciler.check_alive()
            found = get_json(installed, "exporters,pods,secrets", "-n", namespace)["items"]
            jumpstarters = jumpstarters_own | _credential_names(installed, namespace)
            return sorted(
                f"{o['kind']}/{o['metadata']['name']}"
                for o in found
                if not (o["kind"] == "Secret" and o["metadata"]["name"] in jumpstarters)
            )

        wait_for("the pool's status", status)

        def expected() -> list[str]:
            found = get_json(installed, "exporters", "-n", namespace)["items"]
            made = [e["metadata"]["name"] for e in found]
            return sorted(
                [f"Exporter/{n}" for n in made]
                + [f"Pod/{n}" for n in made]
                + [f"Secret/exporter-config-{n}" for n in made]
            )

        wait_for(
            "Exporters, config Secrets and Pods",
            lambda: len(instances()) == 6 and instances() == expected(),
        )
        first, second = sorted(n.split("/", 1)[1] for n in instances() if n.startswith("Exp"))
        # A token rotated by Jumpstarter's controller: the config Secret is updated (the
        # `update` the RBAC grants).
        version = get_json(installed, "secret", f"exporter-config-{first}", "-n", namespace)[
            "metadata"
        ]["resourceVersion"]
        rotate_credential(installed, namespace, first)
        wait_for(
            "the config Secret updated",
            lambda: get_json(installed, "secret", f"exporter-config-{first}", "-n", namespace)[
                "metadata"
            ]["resourceVersion"]
            != version,
        )
        events = get_json(installed, "events.events.k8s.io", "-n", namespace)["items"]
        created = sorted(
            e["related"]["name"]
            for e in events
            if e["reason"] == "ScaleUp" and e["regarding"]["name"] == "rbac"
        )
        assert created == [first, second]
        log = reconciler.log_tail(200)
    assert "forbidden" not in log.lower(), log


def _as_deployed(
    plane: ControlPlane, rendered: list[dict[str, Any]], component: str, tmp_path: Path
) -> tuple[str, str, ContextManager[ReconcilerProcess]]:
    """(its election Lease, its Pod's name, the reconciler run as the component's rendered
    Deployment runs it): its arguments but the ports (here the kernel's choice), its
    environment's Pod fields, its ServiceAccount's token."""
    name = f"virtualtarget-{component}"
    (deployment,) = [
        o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == name
    ]
    pod = deployment["spec"]["template"]["spec"]
    args = container_args(rendered, name)
    fields = {"metadata.namespace": WEBHOOK_NAMESPACE, "metadata.name": f"{name}-0"}
    env = {
        e["name"]: fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        for e in pod["containers"][0]["env"]
    }
    kubeconfig = plane.service_account_kubeconfig(
        WEBHOOK_NAMESPACE, pod["serviceAccountName"], tmp_path / f"{component}.kubeconfig"
    )
    ports = ("--metrics-bind-address", "--health-probe-bind-address")
    process = running_reconciler(
        plane,
        tmp_path,
        name=component,
        kubeconfig=kubeconfig,
        extra=[a for a in args[1:] if not a.startswith(ports)],
        env=env,
    )
    return election_lease(_parser_for(args).parse_args(args)), env["POD_NAME"], process


def test_both_reconcilers_run_from_their_deployments_each_leading_its_own_lease(
    installed: ControlPlane, rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The QEMU and the KubeVirt reconciler at once, as their Deployments run them: neither
    stands the other by."""
    holders: dict[str, str] = {}  # Lease -> the Pod that should hold it
    with ExitStack() as stack:
        running = []
        for component in RECONCILERS:
            lease, pod, process = _as_deployed(installed, rendered, component, tmp_path)
            holders[lease] = pod
            running.append(stack.enter_context(process))
        assert len(holders) == len(RECONCILERS)  # a Lease each

        def leading() -> dict[str, str | None]:
            for reconciler in running:
                reconciler.check_alive()
            leases = get_json(installed, "leases.coordination.k8s.io", "-n", WEBHOOK_NAMESPACE)
            held = {o["metadata"]["name"]: o["spec"].get("holderIdentity") for o in leases["items"]}
            return {lease: held.get(lease) for lease in holders}

        wait_for("each reconciler leading its own Lease", lambda: leading() == holders)
        logs = [reconciler.log_tail(200) for reconciler in running]
    for log in logs:
        assert "forbidden" not in log.lower(), log


def test_webhook_works_with_its_service_account(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = installed.service_account_kubeconfig(
        WEBHOOK_NAMESPACE, "virtualtarget-webhook", tmp_path / "webhook.kubeconfig"
    )
    apply(
        installed,
        virtual_target_class("guarded", namespace),
        exporter_set("guarded", namespace, class_name="guarded", with_template=True),
    )
    with running_webhook(installed, tmp_path, kubeconfig=kubeconfig) as server:
        register_webhooks(installed, server)
        try:
            result = installed.kubectl(
                "delete", "virtualtargetclass", "guarded", "-n", namespace, check=False
            )
            # A KubeVirt class whose credentials Secret does not exist: admitted without a
            # word, as the webhook reads no Secret (its role grants none to try).
            kubevirt = try_apply(installed, _kubevirt_class(namespace))
        finally:
            unregister_webhooks(installed)
        log = server.process.log_tail(200)
    assert result.stderr == (
        'The VirtualTargetClass "guarded" is invalid: metadata.name: Forbidden: '
        "VirtualTargetClass is in use by ExporterSets guarded; delete or move them first\n"
    )
    assert (kubevirt.returncode, kubevirt.stderr) == (0, "")
    assert "forbidden" not in log.lower(), log


def _kubevirt_class(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "VirtualTargetClass",
        "metadata": {"name": "kubevirt", "namespace": namespace},
        "spec": {
            "provisioner": "kubevirt.jumpstarter.dev",
            "credentialsSecretRef": {"name": "no-such-secret"},
            "parameters": {"namespace": "vms", "image": "quay.io/containerdisks/fedora:latest"},
        },
    }


def _get(url: str, token: str | None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError as error:  # not listening yet
        return 0, str(error.reason)


def test_metrics_only_for_callers_allowed_to_get_them_and_probes(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """No token: 401; a token without the role: 403; Prometheus's token (bound to the
    ClusterRole virtualtarget-metrics-reader): the metrics. Both components run under their
    generated RBAC, so the reviews they ask the apiserver for are granted there too."""
    plane = installed
    for account in ("prometheus", "nobody"):
        plane.kubectl("create", "serviceaccount", account, "-n", namespace)
    plane.kubectl(
        "create",
        "clusterrolebinding",
        f"prometheus-{namespace}",
        "--clusterrole=virtualtarget-metrics-reader",
        f"--serviceaccount={namespace}:prometheus",
    )
    tokens = {
        account: plane.kubectl("create", "token", account, "-n", namespace).stdout.strip()
        for account in ("prometheus", "nobody")
    }
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE  # self-signed

    def check(url: str, context: ssl.SSLContext, names: list[str]) -> None:
        assert _get(url, None, context)[0] == 401
        status, body = _get(url, tokens["nobody"], context)
        assert status == 403, body
        assert "virtualtarget-metrics-reader" in body
        status, body = _get(url, tokens["prometheus"], context)
        assert status == 200, body
        for name in names:
            assert f"\n{name}" in body, name

    reconciler_kubeconfig = plane.service_account_kubeconfig(
        WEBHOOK_NAMESPACE, "virtualtarget-reconciler", tmp_path / "reconciler.kubeconfig"
    )
    # Watching one namespace is a namespaced install: its generated Role there.
    scoped = render_component("reconciler", ACCESS, NAMESPACED, (namespace,))
    plane.kubectl(
        "apply",
        "-f",
        "-",
        input=_as_list([o for o in scoped if o["metadata"].get("namespace") == namespace]),
    )
    with running_reconciler(
        plane,
        tmp_path,
        kubeconfig=reconciler_kubeconfig,
        extra=[f"--leader-election-namespace={WEBHOOK_NAMESPACE}", "--namespace", namespace],
    ) as reconciler:
        wait_for("readyz", lambda: _get(f"{reconciler.health_url}/readyz", None)[0] == 200)
        assert _get(f"{reconciler.health_url}/healthz", None) == (200, "ok\n")
        check(
            f"{reconciler.metrics_url}/metrics",
            insecure,
            [
                "workqueue_depth{",
                "controller_runtime_reconcile_total{",
                "leader_election_master_status{",
                "virtualtarget_reconciler_informer_relists_total{",
            ],
        )
        assert "forbidden" not in reconciler.log_tail(200).lower()

    webhook_kubeconfig = plane.service_account_kubeconfig(
        WEBHOOK_NAMESPACE, "virtualtarget-webhook", tmp_path / "webhook.kubeconfig"
    )
    with running_webhook(plane, tmp_path, kubeconfig=webhook_kubeconfig) as server:
        trusted = ssl.create_default_context(cadata=server.certificates.ca_pem.decode())
        check(
            f"{server.url}/metrics",
            trusted,
            ["virtualtarget_webhook_certificate_expiration_timestamp_seconds "],
        )
