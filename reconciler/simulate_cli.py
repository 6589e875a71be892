"""`virtualtarget simulate --scenario FILE --out DIR`: size a pool before deploying it.

Writes DIR/summary.md (lease wait p50/p95, idle instance-minutes, peak instances,
scale events; one row per variant) and DIR/pool.png (total, busy, available over time).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", required=True, type=Path, help="scenario YAML file")
    parser.add_argument("--out", required=True, type=Path, help="folder for summary.md, pool.png")


def run(args: argparse.Namespace) -> int:
    from reconciler.simreport import summary_markdown, write_plot
    from reconciler.simulate import ScenarioError, run_scenario

    try:
        scenario = yaml.safe_load(args.scenario.read_text())
    except OSError as exc:
        print(f"simulate: cannot read {args.scenario}: {exc.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as exc:
        print(f"simulate: {args.scenario} is not valid YAML: {exc}", file=sys.stderr)
        return 2
    if not isinstance(scenario, dict):
        print(f"simulate: {args.scenario}: expected a mapping at the top", file=sys.stderr)
        return 2
    try:
        outcomes = run_scenario(scenario)
    except (ScenarioError, KeyError, TypeError, ValueError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        print(f"simulate: {args.scenario}: {detail}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(summary_markdown(scenario, outcomes))
    write_plot(outcomes[0], args.out / "pool.png", str(scenario.get("name", "pool")))
    print((args.out / "summary.md").read_text())
    return 0
