"""The refill benchmark reads a reconciler's metrics as differences between two scrapes."""

from __future__ import annotations

from bench.refill import pass_figures, sample_totals

TEXT = """\
# HELP workqueue_adds_total Total number of adds handled by workqueue
workqueue_adds_total{name="exporterset"} 10
workqueue_queue_duration_seconds_sum{name="exporterset"} 2.0
workqueue_queue_duration_seconds_count{name="exporterset"} 4
controller_runtime_reconcile_total{controller="exporterset",result="success"} 3
controller_runtime_reconcile_total{controller="exporterset",result="error"} 1
"""


def test_totals_add_up_label_sets() -> None:
    totals = sample_totals(TEXT)
    assert totals["controller_runtime_reconcile_total"] == 4
    assert totals["workqueue_adds_total"] == 10


def test_figures_are_differences_and_means_in_ms() -> None:
    before = sample_totals(TEXT)
    after = {k: v * 3 for k, v in before.items()}
    figures = pass_figures(before, after)
    assert figures["passes"] == 8
    assert figures["queue adds"] == 20
    assert figures["mean queue wait ms"] == 500.0  # 4 s over 8 waits
    assert figures["mean pass ms"] == 0.0  # not scraped: no passes timed
