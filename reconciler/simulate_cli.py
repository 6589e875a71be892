"""`virtualtarget simulate --scenario FILE --out DIR`: size a pool before deploying it.

Writes DIR/summary.md (lease wait p50/p95, idle instance-minutes, peak instances,
scale events; one row per variant) and DIR/pool.png (total, busy, available and the warm
buffer in force over time), and DIR/auto.png for the first variant with `warmBuffer: auto`
when that is not the pool as specified.

The plot needs matplotlib, an optional extra (`pip install 'virtualtarget[simulate]'`):
the webhook and reconciler image does not carry it. Without it the summary is still
written and printed, one line says what to install, and the exit code is 1 (pool.png
was asked for and is missing); `--no-plot` writes the summary alone and exits 0.
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
    parser.add_argument(
        "--no-plot", action="store_true", help="write summary.md only (no matplotlib needed)"
    )


def run(args: argparse.Namespace) -> int:
    from pool.simulation.simreport import summary_markdown, write_plot
    from pool.simulation.simulate import ScenarioError, run_scenario

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
    summary = summary_markdown(scenario, outcomes)
    (args.out / "summary.md").write_text(summary)
    print(summary)
    if args.no_plot:
        return 0
    title = str(scenario.get("name", "pool"))
    auto = [o for o in outcomes[1:] if o.auto][:1]
    try:
        write_plot(outcomes[0], args.out / "pool.png", title)
        for outcome in auto:
            write_plot(outcome, args.out / "auto.png", title)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("matplotlib"):
            raise
        print(
            "simulate: plotting needs matplotlib: pip install 'virtualtarget[simulate]' "
            f"(or pass --no-plot); wrote {args.out / 'summary.md'} without pool.png",
            file=sys.stderr,
        )
        return 1
    return 0
