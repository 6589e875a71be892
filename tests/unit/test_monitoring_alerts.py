"""The component's alerts checked and unit-tested by promtool, Prometheus's own rule
checker: each alert is shown firing and not firing on the series a scrape would give
(tests/data/monitoring/alerts.test.yaml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.monitoring import ALERT_TESTS, alerting_rules, binary, rule_groups, write_rules


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_promtool_accepts_every_rule(tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.yaml")
    done = promtool("check", "rules", str(rules), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(len(group["rules"]) for group in rule_groups()["groups"])
    assert f"SUCCESS: {count} rules found" in done.stdout


def test_every_alert_fires_and_stays_quiet_as_its_unit_tests_expect(tmp_path: Path) -> None:
    # The test file names rules.yaml beside itself: the PrometheusRule's spec, written now.
    write_rules(tmp_path / "rules.yaml")
    tests = shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    done = promtool("test", "rules", str(tests), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = [
        case
        for group in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
        for case in group.get("alert_rule_test", [])
    ]
    firing = {c["alertname"] for c in cases if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    alerts = {rule["alert"] for rule in alerting_rules()}
    assert firing == alerts
    assert quiet == alerts
