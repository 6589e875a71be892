"""The monitoring component against a real Prometheus: it scrapes the webhook and the
reconciler of the loopback stack with the token of the ServiceAccount the component
binds, and the component's warm-buffer alert fires for a pool that cannot fill, then
resolves once the pool fills: Jumpstarter's released 0.9.0 controller serves the namespace
and issues the instance its credential, and the instance's exporter (the release's `jmp
run`, `tests.exporters`) registers with it and comes online.

Prometheus evaluates the component's rules with every `for:` shortened to `FOR` (the
rules are the PrometheusRule's spec, rewritten here only in that field): the alerts'
real durations are minutes. Waits are bounded polls, not timing assertions; the test
prints how long firing and resolving took.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.controlplane import ControlPlane
from harness.stack import (
    register_webhooks,
    running_reconciler,
    running_webhook,
    unregister_webhooks,
)
from pool.model.keys import instance_selector
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    virtual_target_class,
    wait_for,
)
from tests.e2e.prometheus import Prometheus, running_prometheus, scrape_configs
from tests.exporters import ExporterProcesses
from tests.monitoring import one, rendered, rule_groups, service_of, webhook_tls_secret

ALERT = "VirtualTargetWarmBufferShort"
FOR = "2s"


def shortened(spec: dict[str, Any]) -> dict[str, Any]:
    """The rules with every `for:` set to FOR; nothing else changes."""
    rules = copy.deepcopy(spec)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = FOR
    return rules


def prometheus_token(plane: ControlPlane, path: Path) -> Path:
    """A token of the ServiceAccount the component binds to the metrics-reader role, with
    that binding and role applied as rendered."""
    objects = rendered()
    binding = one(objects, "ClusterRoleBinding", "virtualtarget-metrics-reader-prometheus")
    role = one(objects, "ClusterRole", binding["roleRef"]["name"])
    (subject,) = binding["subjects"]
    name, namespace = subject["name"], subject["namespace"]
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        },
        role,
        binding,
    ]
    plane.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )
    path.write_text(plane.kubectl("create", "token", name, "-n", namespace).stdout.strip())
    return path


def targets_health(prometheus: Prometheus) -> dict[str, str]:
    """Each job's last scrape: "up", or its health and error; {} until both were tried."""
    prometheus.check_alive()
    tried = [
        t for t in prometheus.api("/api/v1/targets")["activeTargets"] if t["health"] != "unknown"
    ]
    if len(tried) < 2:
        return {}
    return {
        t["labels"]["job"]: t["health"]
        if t["health"] == "up"
        else f"{t['health']}: {t['lastError']}"
        for t in tried
    }


def online(plane: ControlPlane, ns: str, exporter: str) -> bool:
    """Jumpstarter's controller shows the Exporter Registered and Online."""
    status = get_json(plane, "exporter", exporter, "-n", ns).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return conditions.get("Registered") == conditions.get("Online") == "True"


def pool_alerts(prometheus: Prometheus, namespace: str) -> list[dict[str, Any]]:
    prometheus.check_alive()
    return [a for a in prometheus.alerts(ALERT) if a["labels"].get("namespace") == namespace]


def test_warm_buffer_alert_fires_for_a_pool_that_cannot_fill_and_resolves_once_it_fills(
    control_plane: ControlPlane, ns: str, exporters: ExporterProcesses, tmp_path: Path
) -> None:
    plane = control_plane
    token = prometheus_token(plane, tmp_path / "prometheus-token")
    objects = rendered()
    with (
        running_webhook(plane, tmp_path) as webhook,
        running_reconciler(
            plane, tmp_path, extra=["--namespace", ns, "--leader-election-namespace", ns]
        ) as reconciler,
    ):
        register_webhooks(plane, webhook)
        try:
            # Through the webhook, so the webhook's metrics have reviews to report too.
            apply(
                plane,
                exporter_set(
                    "pool", ns, class_name="qemu", with_template=True, minAvailableReplicas=1
                ),
            )
            # Where a cluster has each Deployment's Service, the process on loopback.
            webhook_job = service_of(objects, "virtualtarget-webhook")["metadata"]["name"]
            reconciler_job = service_of(objects, "virtualtarget-reconciler")["metadata"]["name"]
            configs = scrape_configs(
                objects,
                {
                    webhook_job: urlsplit(webhook.url).netloc,
                    reconciler_job: urlsplit(reconciler.metrics_url).netloc,
                },
                token,
                {webhook_tls_secret(objects): webhook.certificates.directory},
            )
            rules = shortened(rule_groups())
            with running_prometheus(tmp_path / "prometheus", configs, rules) as prometheus:
                started = time.monotonic()
                # Both scraped with the token and TLS settings the ServiceMonitors give.
                up = {webhook_job: "up", reconciler_job: "up"}
                assert wait_for("both targets scraped", lambda: targets_health(prometheus)) == up
                (alert,) = wait_for("the alert firing", lambda: pool_alerts(prometheus, ns))
                fired = time.monotonic() - started
                assert alert["labels"]["exporterset"] == "pool"
                assert alert["annotations"]["summary"] == (
                    f"ExporterSet {ns}/pool is 1 warm instance(s) short of its buffer"
                )
                assert alert["annotations"]["runbook_url"].endswith("#virtualtargetwarmbuffershort")
                # The metrics' own `endpoint` label survives the target's (honorLabels).
                reviews = prometheus.api(
                    "/api/v1/query",
                    query=f'virtualtarget_webhook_requests_total{{job="{webhook_job}"}}',
                )["result"]
                assert reviews and all(r["metric"]["endpoint"].startswith("/") for r in reviews)

                # The class appears: the pool gets an instance, Jumpstarter's controller
                # issues it a credential, and its exporter registers and comes online.
                apply(plane, virtual_target_class("qemu", ns))
                created = time.monotonic()
                (exporter,) = wait_for(
                    "the instance",
                    lambda: get_json(plane, "exporters", "-n", ns, "-l", instance_selector("pool"))[
                        "items"
                    ],
                )
                name = exporter["metadata"]["name"]
                # Its Pod is made once Jumpstarter's controller has issued the credential.
                wait_for(
                    "the instance's Pod",
                    lambda: [
                        p
                        for p in get_json(plane, "pods", "-n", ns)["items"]
                        if p["metadata"]["name"] == name
                    ],
                )
                wait_for("the instance online", lambda: online(plane, ns, name), timeout=90)
                came_online = time.monotonic()
                wait_for("the alert resolved", lambda: not pool_alerts(prometheus, ns))
                resolved = time.monotonic()
                # Resolved because the buffer is met, not because the scrape stopped.
                assert targets_health(prometheus) == up
                shortfall = prometheus.api(
                    "/api/v1/query",
                    query=f'virtualtarget_exporterset_warm_buffer_shortfall{{namespace="{ns}"}}',
                )["result"]
                assert [s["value"][1] for s in shortfall] == ["0"]
        finally:
            unregister_webhooks(plane)
        reconciler.check_alive()
    print(
        f"\n{ALERT} (for: {FOR}): fired {fired:.1f}s after Prometheus started; resolved "
        f"{resolved - created:.1f}s after the class was created, "
        f"{resolved - came_online:.1f}s after the instance was seen online"
    )
