"""The simulation: shipped scenarios run, artefacts are written, bad input is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pool.simulation.simulate import ScenarioError, run_scenario
from virtualtarget.cli import main

SCENARIOS = sorted((Path(__file__).parents[2] / "examples" / "scenarios").glob("*.yaml"))


def test_two_scenarios_ship() -> None:
    assert len(SCENARIOS) >= 2


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_runs_and_serves_every_lease(path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    outcomes = run_scenario(scenario)
    assert len(outcomes) == 1 + len(scenario.get("variants") or [])  # the base, each variant
    for outcome in outcomes:
        assert outcome.waits and outcome.unserved == 0
        assert outcome.percentile(50) <= outcome.percentile(95)
        assert outcome.samples and all(s.busy + s.available <= s.total for s in outcome.samples)


def test_a_bigger_warm_buffer_shortens_waits_and_costs_idle_time() -> None:
    scenario = {
        "duration": "3h",
        "boot": "5m",
        "pool": {"maxReplicas": 0, "scaleDownCooldown": "5m"},
        "demand": [{"from": "0h", "to": "3h", "leasesPerHour": 6, "hold": "10m"}],
        "variants": [{"minAvailableReplicas": 3}],
    }
    cold, warm = run_scenario(scenario)
    assert warm.percentile(95) < cold.percentile(95)
    assert warm.idle_minutes > cold.idle_minutes


def test_cli_writes_summary_and_plot(tmp_path: Path) -> None:
    assert main(["simulate", "--scenario", str(SCENARIOS[0]), "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "lease wait p95" in summary and "idle instance-minutes" in summary
    assert (tmp_path / "pool.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_scenario_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("pool: {scaleDownCooldown: soon}\n")
    assert main(["simulate", "--scenario", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "scaleDownCooldown" in err
    with pytest.raises(ScenarioError):
        run_scenario({"leases": [{"at": "later", "hold": "1m"}]})


def test_auto_sizes_the_buffer_with_the_demand_over_the_day() -> None:
    scenario = {
        "duration": "6h",
        "boot": "3m",
        "pool": {"maxReplicas": 0, "scaleDownCooldown": "10m", "minAvailableReplicas": 0},
        "demand": [
            {"from": "0h", "to": "2h", "leasesPerHour": 2, "hold": "10m"},
            {"from": "2h", "to": "4h", "leasesPerHour": 40, "hold": "10m"},
        ],
        "variants": [{"label": "auto", "warmBuffer": "auto"}],
    }
    cold, auto = run_scenario(scenario)
    assert auto.auto and not cold.auto
    busy_hour = [s.warm for s in auto.samples if 150 <= s.minute < 240]
    night = [s.warm for s in auto.samples if s.minute >= 330]
    assert max(busy_hour) >= 3 and max(night) == 0  # rises with the demand, falls after it
    assert auto.percentile(95) < cold.percentile(95)


def test_auto_settings_are_checked_as_the_webhook_checks_them() -> None:
    with pytest.raises(ScenarioError, match="warm-buffer"):
        run_scenario({"pool": {"warmBuffer": "sometimes"}, "duration": "1h"})


def test_cli_plots_the_auto_variant(tmp_path: Path) -> None:
    ramp = next(p for p in SCENARIOS if p.stem == "monday-ramp")
    assert main(["simulate", "--scenario", str(ramp), "--out", str(tmp_path)]) == 0
    assert "| auto |" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "auto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
