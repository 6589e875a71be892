"""The monitoring component (`deploy/components/monitoring`) as the tests read it, and
Prometheus's own programs to run its rules.

promtool and prometheus come from Debian's package (`.ci/run` installs it). When they
are missing the tests fail with the command that installs them; they never skip.
"""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.deploy_render import render_overlay

Obj = dict[str, Any]

COMPONENT = "monitoring"
INSTALL = "apt-get install -y --no-install-recommends prometheus"
ALERT_TESTS = Path(__file__).parent / "data" / "monitoring" / "alerts.test.yaml"


def binary(name: str) -> str:
    """The path of `promtool` or `prometheus`; the test fails when it is not installed."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(
            f"{name} not found on PATH: install Prometheus's package "
            f"(`apt-get update && {INSTALL}`; .ci/run does)",
            pytrace=False,
        )
    return found


@cache
def rendered(overlay: str = "cert-manager") -> tuple[Obj, ...]:
    """The overlay with the monitoring component, as a cluster would install it."""
    return tuple(render_overlay(overlay, components=[COMPONENT]))


def of_kind(objects: tuple[Obj, ...] | list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: tuple[Obj, ...] | list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def selected_service(objects: tuple[Obj, ...], monitor: Obj) -> Obj:
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    namespace = monitor["metadata"]["namespace"]
    (service,) = [
        s
        for s in of_kind(objects, "Service")
        if s["metadata"]["namespace"] == namespace
        and wanted <= (s["metadata"].get("labels") or {}).items()
    ]
    return service


def service_of(objects: tuple[Obj, ...], deployment: str) -> Obj:
    """The Service in front of a Deployment's pods."""
    labels = one(objects, "Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
    (service,) = [
        s for s in of_kind(objects, "Service") if s["spec"]["selector"].items() <= labels.items()
    ]
    return service


def webhook_tls_secret(objects: tuple[Obj, ...]) -> str:
    """The Secret the webhook serves from (mounted at /tls)."""
    pod = one(objects, "Deployment", "virtualtarget-webhook")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    name: str = volumes[mounts["/tls"]]["secret"]["secretName"]
    return name


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's spec: a Prometheus rules file as it is (`groups:`)."""
    (rule,) = of_kind(rendered(), "PrometheusRule")
    spec: dict[str, Any] = rule["spec"]
    return spec


def alerting_rules(spec: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    spec = rule_groups() if spec is None else spec
    return [r for group in spec["groups"] for r in group["rules"] if "alert" in r]


def write_rules(path: Path, spec: dict[str, Any] | None = None) -> Path:
    """Write the rules file Prometheus and promtool load (the PrometheusRule's spec)."""
    path.write_text(yaml.safe_dump(rule_groups() if spec is None else spec, sort_keys=False))
    return path
