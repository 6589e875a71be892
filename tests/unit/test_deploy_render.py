"""The rendered overlays install what the issue asks for, and the webhook serves every path."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from api.imagepolicy import from_flags
from api.jumpstarter import JUMPSTARTER_REPOSITORIES
from api.provisioners import DEFAULT_IMAGES
from certs.authority import ensure_certificates
from harness.deploy_render import (
    DEPLOY,
    OVERLAYS,
    REPO,
    WEBHOOK_CONFIGURATION_KINDS,
    WEBHOOK_NAMESPACE,
    WEBHOOK_SERVICE,
    RenderError,
    container_args,
    render_overlay,
)
from pool.model.keys import SET_LABEL
from virtualtarget.cli import _parser_for
from webhook.routes import ENDPOINTS, KINDS, Role

Obj = dict[str, Any]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[Obj]:
    return render_overlay(request.param)


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def webhooks(objects: list[Obj]) -> list[tuple[str, Obj]]:
    return [
        (o["kind"], hook)
        for o in objects
        if o["kind"] in WEBHOOK_CONFIGURATION_KINDS
        for hook in o["webhooks"]
    ]


def test_every_namespaced_object_is_in_the_product_namespace(rendered: list[Obj]) -> None:
    one(rendered, "Namespace", WEBHOOK_NAMESPACE)
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        *WEBHOOK_CONFIGURATION_KINDS,
    }
    namespaced = [obj for obj in rendered if obj["kind"] not in cluster_scoped]
    assert namespaced  # the Deployments, Services, ServiceAccounts, ... of every overlay
    for obj in namespaced:
        assert obj["metadata"].get("namespace") == WEBHOOK_NAMESPACE, obj["metadata"]


def _crds(objects: list[Obj]) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_crds_are_installed_and_the_exporter_crd_only_without_jumpstarter(
    overlay: str,
) -> None:
    # Jumpstarter owns the Exporter CRD: an install beside it must not replace it.
    ours = {f"{k.plural}.{k.group}" for k in KINDS.values() if k.kind != "Exporter"}
    without_jumpstarter = overlay == "self-signed-exporter-crd"
    exporter = {"exporters.jumpstarter.dev"} if without_jumpstarter else set()
    assert _crds(render_overlay(overlay)) == ours | exporter


def test_webhook_paths_are_exactly_the_served_endpoints(rendered: list[Obj]) -> None:
    served = {(e.role.value, e.path) for e in ENDPOINTS}
    registered = {
        (
            "mutate" if kind.startswith("Mutating") else "validate",
            hook["clientConfig"]["service"]["path"],
        )
        for kind, hook in webhooks(rendered)
    }
    assert registered == served


def test_webhook_rules_match_the_path_kind_and_admission_contract(rendered: list[Obj]) -> None:
    by_path = {e.path: e for e in ENDPOINTS}
    assert len(webhooks(rendered)) == len(ENDPOINTS)
    for _, hook in webhooks(rendered):
        endpoint = by_path[hook["clientConfig"]["service"]["path"]]
        assert hook["clientConfig"]["service"]["name"] == WEBHOOK_SERVICE
        assert hook["clientConfig"]["service"]["namespace"] == WEBHOOK_NAMESPACE
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] <= 5
        assert hook["matchPolicy"] == "Equivalent"
        (rule,) = hook["rules"]
        assert rule["apiGroups"] == [endpoint.kind.group]
        assert rule["apiVersions"] == [endpoint.kind.version]
        assert rule["resources"] == [endpoint.kind.plural]  # not status: its writers are not ours
        # A class in use is refused; a set's leased instances are named.
        deleted = ("VirtualTargetClass", "ExporterSet")
        deletes = endpoint.role is Role.VALIDATE and endpoint.kind.kind in deleted
        assert rule["operations"] == ["CREATE", "UPDATE"] + (["DELETE"] if deletes else [])
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
        ]
        # Jumpstarter's kind: only the Exporters the pools own (they carry the set label).
        owned_only = {"matchExpressions": [{"key": SET_LABEL, "operator": "Exists"}]}
        assert (hook.get("objectSelector") == owned_only) == (endpoint.kind.kind == "Exporter")


def test_service_selects_the_webhook_pods_on_the_served_port(rendered: list[Obj]) -> None:
    service = one(rendered, "Service", WEBHOOK_SERVICE)
    deployment = one(rendered, "Deployment", "virtualtarget-webhook")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443  # webhook clientConfig.service.port defaults to 443
    (container,) = pod["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named[port["targetPort"]] == 9443
    assert "--port=9443" in container["args"] and "--cert-dir=/tls" in container["args"]


def test_webhook_is_highly_available_and_locked_down(rendered: list[Obj]) -> None:
    deployment = one(rendered, "Deployment", "virtualtarget-webhook")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pdb = one(rendered, "PodDisruptionBudget", "virtualtarget-webhook")
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert pdb["spec"]["minAvailable"] == 1
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert (
        anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == spec["selector"]["matchLabels"]
    )
    (container,) = pod["containers"]
    assert container["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {container[p]["httpGet"]["scheme"] for p in ("startupProbe", "livenessProbe")} == {
        "HTTPS"
    }
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tls"]]["secret"]["secretName"] == "virtualtarget-webhook-tls"


@pytest.mark.parametrize("name", ["virtualtarget-webhook", "virtualtarget-reconciler"])
def test_pods_run_non_root_read_only_with_resources(rendered: list[Obj], name: str) -> None:
    pod = one(rendered, "Deployment", name)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
        assert "memory" in container["resources"]["limits"]


def test_reconciler_runs_the_qemu_provisioner_two_replicas_with_probes(
    rendered: list[Obj],
) -> None:
    one(rendered, "ServiceAccount", "virtualtarget-reconciler")
    deployment = one(rendered, "Deployment", "virtualtarget-reconciler")
    assert deployment["spec"]["replicas"] == 2  # one leads, one stands by
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "reconcile",
        "--provisioner=qemu.jumpstarter.dev",
        "--metrics-bind-address=:8443",
        "--health-probe-bind-address=:8081",
        f"--allowed-image-prefixes={JUMPSTARTER_REPOSITORIES}",
    ]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8443, "probes": 8081}
    assert container["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    pdb = one(rendered, "PodDisruptionBudget", "virtualtarget-reconciler")
    assert pdb["spec"]["minAvailable"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(rendered, "Service", "virtualtarget-reconciler-metrics")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8443, "targetPort": "metrics"}]


def test_metrics_readers_get_only_the_metrics_path(rendered: list[Obj]) -> None:
    role = one(rendered, "ClusterRole", "virtualtarget-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_self_signed_ca_bundle_verifies_the_serving_certificate(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path, WEBHOOK_SERVICE, WEBHOOK_NAMESPACE)
    objects = render_overlay("self-signed", ca_bundle=certs.ca_pem)
    leaf = x509.load_pem_x509_certificate(certs.cert.read_bytes())
    hooks = webhooks(objects)
    assert len(hooks) == len(ENDPOINTS)
    for _, hook in hooks:
        bundle = base64.b64decode(hook["clientConfig"]["caBundle"])
        service = hook["clientConfig"]["service"]
        # The name kube-apiserver checks: <service>.<namespace>.svc
        host = f"{service['name']}.{service['namespace']}.svc"
        verifier = (
            PolicyBuilder()
            .store(Store(x509.load_pem_x509_certificates(bundle)))
            .build_server_verifier(x509.DNSName(host))
        )
        verifier.verify(leaf, [])  # raises if the bundle does not vouch for the certificate


def test_self_signed_overlay_installs_the_tls_secret() -> None:
    secret = one(render_overlay("self-signed"), "Secret", "virtualtarget-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert {"tls.crt", "tls.key"} <= secret["data"].keys()
    assert not any(o["kind"] == "ConfigMap" for o in render_overlay("self-signed"))


def test_cert_manager_overlay_injects_the_ca_from_its_certificate() -> None:
    objects = render_overlay("cert-manager")
    certificate = one(objects, "Certificate", "virtualtarget-webhook")
    assert certificate["spec"]["secretName"] == "virtualtarget-webhook-tls"
    assert f"{WEBHOOK_SERVICE}.{WEBHOOK_NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    issuer = one(objects, "Issuer", certificate["spec"]["issuerRef"]["name"])
    assert issuer["metadata"]["namespace"] == WEBHOOK_NAMESPACE
    source = f"{WEBHOOK_NAMESPACE}/{certificate['metadata']['name']}"
    for kind in WEBHOOK_CONFIGURATION_KINDS:
        annotations = one(objects, kind, "virtualtarget-webhook")["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == source


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_loopback_registration_swaps_the_service_for_a_url(overlay: str) -> None:
    objects = render_overlay(overlay, webhook_url="https://127.0.0.1:9443/", ca_bundle=b"PEM")
    hooks = webhooks(objects)
    assert {h["clientConfig"]["url"] for _, h in hooks} == {
        f"https://127.0.0.1:9443{e.path}" for e in ENDPOINTS
    }
    assert all("service" not in h["clientConfig"] for _, h in hooks)
    assert {h["clientConfig"]["caBundle"] for _, h in hooks} == {base64.b64encode(b"PEM").decode()}


def test_rendering_writes_nothing_into_the_working_tree() -> None:
    before = sorted(p.relative_to(REPO) for p in DEPLOY.rglob("*"))
    render_overlay("self-signed")
    assert sorted(p.relative_to(REPO) for p in DEPLOY.rglob("*")) == before


def test_unknown_overlay_is_refused() -> None:
    with pytest.raises(RenderError, match="unknown overlay"):
        render_overlay("nope")


def test_kubectl_kustomize_renders_the_base_alone() -> None:
    from harness.deploy_render import kubectl

    done = subprocess.run([kubectl(), "kustomize", DEPLOY / "base"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_webhook_and_reconciler_get_the_overlays_one_image_allow_list(
    rendered: list[Obj],
) -> None:
    """Jumpstarter's repositories, read by each component's own command line."""
    for name in ("virtualtarget-webhook", "virtualtarget-reconciler"):
        args = container_args(rendered, name)
        assert [a for a in args if "image" in a] == [
            f"--allowed-image-prefixes={JUMPSTARTER_REPOSITORIES}"
        ]
        policy = from_flags(_parser_for(args).parse_args(args))
        assert policy is not None and policy.prefixes == (JUMPSTARTER_REPOSITORIES,)
        assert not policy.require_digest
        for reference in DEFAULT_IMAGES["qemu.jumpstarter.dev"].values():
            assert policy.refusal(reference) is None
        assert policy.refusal("registry.example.com/lab/qemu-runtime:1") is not None


def test_the_base_alone_configures_no_image_allow_list() -> None:
    from harness.deploy_render import kubectl

    done = subprocess.run([kubectl(), "kustomize", DEPLOY / "base"], capture_output=True, text=True)
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    for name in ("virtualtarget-webhook", "virtualtarget-reconciler"):
        assert not [a for a in container_args(objects, name) if "image" in a]
