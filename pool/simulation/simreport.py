"""The simulation's two artefacts: a Markdown summary table and a plot of the pool.

The plot uses matplotlib's Agg backend (no display), imported only when a plot is
drawn: matplotlib is the optional extra `simulate`, absent from the image. It shows the
outcome it is given: total, busy and available instances over time, the warm buffer in
force (sized from demand under `warmBuffer: auto`), and lease requests still waiting as a
shaded area.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pool.simulation.simulate import Outcome

__all__ = ["summary_markdown", "write_plot"]


def summary_markdown(scenario: Mapping[str, Any], outcomes: Sequence[Outcome]) -> str:
    title = scenario.get("name", "scenario")
    lines = [
        f"# Pool simulation: {title}",
        "",
        str(scenario.get("description", "")).strip(),
        "",
        "| pool | leases | lease wait p50 (min) | lease wait p95 (min) | never served "
        "| idle instance-minutes | peak instances | scale events |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.label} | {len(o.waits)} | {o.percentile(50):.1f} | {o.percentile(95):.1f} "
            f"| {o.unserved} | {o.idle_minutes:.0f} | {o.peak} | {o.scale_events} |"
        )
    lines += [
        "",
        "Lease wait: from request to assignment (leases never served count with their wait "
        "until the end). Idle instance-minutes: available instances times time. Scale "
        "events: instances created or removed.",
        "",
    ]
    return "\n".join(line for line in lines if line is not None)


def write_plot(outcome: Outcome, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = [s.minute / 60 for s in outcome.samples]
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    ax.fill_between(
        hours,
        [s.pending for s in outcome.samples],
        step="post",
        color="#f4a582",
        alpha=0.5,
        label="lease requests waiting",
    )
    lines = (
        ("total", "#222222", 1.8, "total instances"),
        ("busy", "#d6604d", 1.4, "busy (leased or in hooks)"),
        ("available", "#4393c3", 1.4, "available (warm)"),
        ("warm", "#1b7837", 1.2, "warm buffer in force"),
    )
    for field, color, width, label in lines:
        ax.step(
            hours,
            [getattr(s, field) for s in outcome.samples],
            where="post",
            color=color,
            linewidth=width,
            label=label,
        )
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("instances")
    ax.set_title(f"{title}: {outcome.label}")
    ax.set_ylim(bottom=0)
    ax.set_xlim(hours[0] if hours else 0, hours[-1] if hours else 1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=5, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
