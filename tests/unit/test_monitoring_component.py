"""The monitoring component scrapes what the overlays install, the way the components
require, and every alert it adds has a runbook in docs/runbooks.md."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from certs.authority import serving_names
from harness.deploy_render import DEPLOY, OVERLAYS, REPO, WEBHOOK_NAMESPACE, kubectl
from scrape.auth import METRICS_PATH
from tests.monitoring import (
    COMPONENT,
    Obj,
    alerting_rules,
    of_kind,
    one,
    rendered,
    selected_service,
    service_of,
    webhook_tls_secret,
)

TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # in Prometheus's pod


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_metrics_service_is_scraped_over_https_with_prometheus_token(overlay: str) -> None:
    objects = rendered(overlay)
    monitors = {
        selected_service(objects, m)["metadata"]["name"]: m
        for m in of_kind(objects, "ServiceMonitor")
    }
    components = ("virtualtarget-webhook", "virtualtarget-reconciler")  # the Deployments
    assert monitors.keys() == {service_of(objects, c)["metadata"]["name"] for c in components}
    for name, monitor in monitors.items():
        service = one(objects, "Service", name)
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
        assert endpoint["path"] == METRICS_PATH
        assert endpoint["scheme"] == "https"
        # Both components ask the apiserver about the caller's token (scrape.auth).
        assert endpoint["bearerTokenFile"] == TOKEN_FILE
        # The metrics' own `namespace` and `endpoint` labels must not be renamed.
        assert endpoint["honorLabels"] is True
        assert "jobLabel" not in monitor["spec"]  # job = the Service's name (the alerts')


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_webhook_is_verified_with_the_ca_its_overlay_provides(overlay: str) -> None:
    objects = rendered(overlay)
    tls = one(objects, "ServiceMonitor", "virtualtarget-webhook")["spec"]["endpoints"][0][
        "tlsConfig"
    ]
    assert "insecureSkipVerify" not in tls
    ca = tls["ca"]["secret"]
    assert ca == {"name": webhook_tls_secret(objects), "key": "ca.crt"}
    server_name = tls["serverName"]
    assert server_name in serving_names("virtualtarget-webhook", WEBHOOK_NAMESPACE)
    if overlay == "cert-manager":
        # cert-manager writes ca.crt beside tls.crt in the Secret it keeps.
        certificate = one(objects, "Certificate", "virtualtarget-webhook")["spec"]
        assert certificate["secretName"] == ca["name"]
        assert server_name in certificate["dnsNames"]
        return
    data = one(objects, "Secret", ca["name"])["data"]
    leaf = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    roots = x509.load_pem_x509_certificates(base64.b64decode(data[ca["key"]]))
    verifier = PolicyBuilder().store(Store(roots)).build_server_verifier(x509.DNSName(server_name))
    verifier.verify(leaf, [])  # raises unless the CA vouches for the served name


def test_the_reconciler_is_not_verified_while_it_makes_its_own_certificate() -> None:
    objects = rendered()
    tls = one(objects, "ServiceMonitor", "virtualtarget-reconciler")["spec"]["endpoints"][0][
        "tlsConfig"
    ]
    (container,) = one(objects, "Deployment", "virtualtarget-reconciler")["spec"]["template"][
        "spec"
    ]["containers"]
    # Without --metrics-cert-dir it serves a certificate made at start that no CA signs;
    # given one, this test asks for verification instead.
    assert not any(a.startswith("--metrics-cert-dir") for a in container["args"])
    assert tls == {"insecureSkipVerify": True}


def test_prometheus_may_discover_the_services_and_read_their_metrics() -> None:
    objects = rendered()
    binding = one(objects, "ClusterRoleBinding", "virtualtarget-metrics-reader-prometheus")
    assert binding["roleRef"]["kind"] == "ClusterRole"
    one(objects, "ClusterRole", binding["roleRef"]["name"])  # the role scrape.auth names
    assert binding["roleRef"]["name"] == "virtualtarget-metrics-reader"
    prometheus = [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]
    assert binding["subjects"] == prometheus
    discovery = one(objects, "RoleBinding", "virtualtarget-prometheus-discovery")
    assert discovery["metadata"]["namespace"] == WEBHOOK_NAMESPACE
    assert discovery["subjects"] == prometheus
    role = one(objects, "Role", discovery["roleRef"]["name"])
    core = [r for r in role["rules"] if r["apiGroups"] == [""]]
    assert core == [
        {
            "apiGroups": [""],
            "resources": ["services", "endpoints", "pods"],
            "verbs": ["get", "list", "watch"],
        }
    ]


def test_the_component_installs_in_the_product_namespace_with_the_product_label() -> None:
    objects = _component_objects()
    assert objects
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "virtualtarget"
        if obj["kind"] != "ClusterRoleBinding":
            assert obj["metadata"]["namespace"] == WEBHOOK_NAMESPACE


def _component_objects() -> list[Obj]:
    kinds = {"ServiceMonitor", "PrometheusRule"}
    names = {"virtualtarget-metrics-reader-prometheus", "virtualtarget-prometheus-discovery"}
    found = [o for o in rendered() if o["kind"] in kinds or o["metadata"]["name"] in names]
    assert len(found) == 6  # two ServiceMonitors, the rule, three RBAC objects
    return found


def test_alerts_select_the_jobs_the_service_monitors_scrape() -> None:
    objects = rendered()
    jobs = {
        selected_service(objects, m)["metadata"]["name"] for m in of_kind(objects, "ServiceMonitor")
    }
    rules = alerting_rules()
    assert rules
    for rule in rules:
        named = set(re.findall(r'job="([^"]+)"', rule["expr"]))
        assert named and named <= jobs, rule["alert"]


# -- the pages: the runbooks, and the monitoring section of operations -------------------

RUNBOOKS = REPO / "docs" / "runbooks.md"


def _page_section(page: Path, title: str) -> str:
    text = page.read_text()
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_links_to_its_runbook_section() -> None:
    page = RUNBOOKS.read_text()
    runbooks = dict(
        (match.group(1), body)
        for match, body in zip(
            re.finditer(r"^## (\S+)\n", page, re.M),
            re.split(r"^## \S+\n", page, flags=re.M)[1:],
            strict=True,
        )
    )
    alerts = alerting_rules()
    assert set(runbooks) == {rule["alert"] for rule in alerts}
    bases = set()
    for rule in alerts:
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical")
        base, _, anchor = annotations["runbook_url"].partition("#")
        bases.add(base)
        assert anchor == _slug(rule["alert"])
        for part in ("**Meaning.**", "**Check.**", "**Action.**"):
            assert part in runbooks[rule["alert"]], (rule["alert"], part)
    assert bases == {"https://github.com/jumpstarter-dev/virtualtarget/blob/main/docs/runbooks.md"}


def test_the_example_overlay_renders_for_another_prometheus(tmp_path: Path) -> None:
    """The kustomization docs/operations.md shows: the component for another Prometheus."""
    monitoring = _page_section(REPO / "docs" / "operations.md", "Monitoring")
    (block,) = re.findall(r"```yaml\n(.*?)```", monitoring, re.S)
    example = yaml.safe_load(block)
    assert f"../../components/{COMPONENT}" in example["components"]
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    shutil.copytree(REPO / "crds", tmp_path / "crds")
    overlay = tmp_path / "deploy" / "overlays" / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(block)
    done = subprocess.run([kubectl(), "kustomize", overlay], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    subjects = [
        o["subjects"]
        for o in objects
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "prometheus-access"
    ]
    new = example["patches"][0]["patch"]
    assert len(subjects) == 2
    assert all(s == [yaml.safe_load(new)[0]["value"]] for s in subjects)
    for obj in of_kind(objects, "ServiceMonitor") + of_kind(objects, "PrometheusRule"):
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
