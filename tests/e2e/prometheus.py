"""A real Prometheus on loopback, scraping the loopback stack as the monitoring
component's ServiceMonitors tell the Prometheus Operator to scrape it in a cluster.

No operator runs here, so `scrape_configs` does its part for the fields the component
uses, after the operator's documented mapping: one job per ServiceMonitor endpoint, the
target labels it sets (`job` = the Service's name, `namespace`, `service`, `endpoint` =
the port's name, `pod`), `honorLabels`, the scheme and path, `bearerTokenFile` as the
token file, and `tlsConfig` with a CA taken from a Secret key. Where a cluster has a
Service in front of a Pod, the test names the loopback address of the process behind
it; where Prometheus's pod has a projected token and Secrets, the test gives files. An
endpoint field not translated here fails the test, so the ServiceMonitors cannot carry
a setting this test does not exercise.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import free_port
from harness.stack import ChildProcess
from tests.monitoring import Obj, binary, of_kind, selected_service

SCRAPE_INTERVAL = "1s"
_ENDPOINT_FIELDS = {"port", "path", "scheme", "honorLabels", "bearerTokenFile", "tlsConfig"}
_TLS_FIELDS = {"ca", "serverName", "insecureSkipVerify"}


def _tls_config(tls: Mapping[str, Any], secret_dirs: Mapping[str, Path]) -> dict[str, Any]:
    unknown = tls.keys() - _TLS_FIELDS
    assert not unknown, f"tlsConfig fields this test does not translate: {sorted(unknown)}"
    config: dict[str, Any] = {}
    if "ca" in tls:
        secret = tls["ca"]["secret"]  # a Secret's keys are files where it is mounted
        config["ca_file"] = str(secret_dirs[secret["name"]] / secret["key"])
    if "serverName" in tls:
        config["server_name"] = tls["serverName"]
    if tls.get("insecureSkipVerify"):
        config["insecure_skip_verify"] = True
    return config


def scrape_configs(
    objects: tuple[Obj, ...],
    addresses: Mapping[str, str],
    token_file: Path,
    secret_dirs: Mapping[str, Path],
) -> list[dict[str, Any]]:
    """Prometheus scrape configs for the rendered ServiceMonitors. `addresses` maps each
    Service's name to the `host:port` of the process behind it."""
    configs = []
    for monitor in of_kind(objects, "ServiceMonitor"):
        service = selected_service(objects, monitor)
        name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
        for index, endpoint in enumerate(monitor["spec"]["endpoints"]):
            unknown = endpoint.keys() - _ENDPOINT_FIELDS
            assert not unknown, f"endpoint fields this test does not translate: {sorted(unknown)}"
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
            config: dict[str, Any] = {
                "job_name": f"serviceMonitor/{namespace}/{monitor['metadata']['name']}/{index}",
                "scheme": endpoint.get("scheme", "http"),
                "metrics_path": endpoint.get("path", "/metrics"),
                "honor_labels": endpoint.get("honorLabels", False),
                "tls_config": _tls_config(endpoint.get("tlsConfig", {}), secret_dirs),
                "static_configs": [
                    {
                        "targets": [addresses[name]],
                        "labels": {
                            "job": name,
                            "namespace": namespace,
                            "service": name,
                            "endpoint": endpoint["port"],
                            "pod": f"{name}-0",
                        },
                    }
                ],
            }
            if "bearerTokenFile" in endpoint:
                config["authorization"] = {"credentials_file": str(token_file)}
            configs.append(config)
    return configs


@dataclass
class Prometheus:
    url: str
    process: ChildProcess

    def api(self, path: str, **params: str) -> Any:
        """The `data` of a Prometheus HTTP API answer (`/api/v1/...`)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.api("/api/v1/alerts")["alerts"]
        return [a for a in found if a["labels"]["alertname"] == name and a["state"] == state]

    def check_alive(self) -> None:
        self.process.check_alive()  # raises with the tail of its log once it has exited


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, configs: list[dict[str, Any]], rules: dict[str, Any]
) -> Iterator[Prometheus]:
    """Prometheus with its own config and data folder under `workdir`, scraping and
    evaluating every second."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    config = {
        "global": {
            "scrape_interval": SCRAPE_INTERVAL,
            "scrape_timeout": SCRAPE_INTERVAL,
            "evaluation_interval": SCRAPE_INTERVAL,
        },
        "rule_files": [str(workdir / "rules.yaml")],
        "scrape_configs": configs,
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    address = f"127.0.0.1:{free_port()}"
    log = (workdir / "prometheus.log").open("wb")
    popen = subprocess.Popen(
        [
            binary("prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={address}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    prometheus = Prometheus(f"http://{address}", ChildProcess("prometheus", popen, log))
    try:
        deadline = time.monotonic() + 30
        while True:
            prometheus.check_alive()
            try:
                with urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"prometheus not ready after 30s; see {log.name}"
                    ) from None
                time.sleep(0.2)
        yield prometheus
    finally:
        prometheus.process.stop(timeout=15)
