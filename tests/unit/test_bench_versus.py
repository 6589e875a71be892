"""The side-by-side benchmark's pure parts: the run order, the writes it counts, the ratios."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from bench._apiserver import agent, audit_requests
from bench.versus import (
    ELECTION,
    Alone,
    Run,
    alone_line,
    bare_exporters,
    figures,
    orders,
    ratio_rows,
    writes_of,
)

USER = "system:serviceaccount:vs0-ours:jumpstarter-exporterset-qemu-jumpstarter-dev"


def test_runs_alternate_which_controller_goes_first() -> None:
    assert orders(1) == ["theirs", "ours", "ours", "theirs"]
    assert orders(2) == ["theirs", "ours", "ours", "theirs"] * 2


def test_only_the_users_writes_are_counted() -> None:
    counts = Counter(
        {
            (USER, "create", "pods"): 4,
            (USER, "get", "pods"): 9,
            (USER, "update", ELECTION): 3,
            ("admin", "create", "pods"): 7,
        }
    )
    assert writes_of(counts, USER) == Counter({("create", "pods"): 4, ("update", ELECTION): 3})


def test_figures_keep_the_election_lease_apart() -> None:
    run = Run("ours", pools=2, refill_pools=1, fill_s=3.0, refill_s=None, filled=4, kept=5)
    run.fill_writes = Counter({("create", "pods"): 4, ("update", ELECTION): 6})
    run.rest_writes = Counter({("update", ELECTION): 5, ("patch", "secrets"): 1})
    found = figures(run)
    assert found["fill writes per instance"] == 1.0  # 4 writes, 4 instances
    assert found["instances per pool, after the rest"] == 2.5
    assert found["writes at rest (election Lease apart)"] == 1.0
    assert found["election Lease writes at rest"] == 5.0
    assert found["refill s"] is None


def test_ratios_are_ours_over_theirs_of_the_medians() -> None:
    runs = [
        Run("theirs", 1, 1, fill_s=10.0, refill_s=4.0),
        Run("ours", 1, 1, fill_s=2.0, refill_s=None),
        Run("ours", 1, 1, fill_s=4.0, refill_s=1.0),
        Run("theirs", 1, 1, fill_s=30.0, refill_s=8.0),
    ]
    rows = {name: (theirs, ours, ratio) for name, theirs, ours, ratio in ratio_rows(runs)}
    assert rows["fill s"] == (20.0, 3.0, 0.15)
    assert rows["refill s"] == (6.0, None, None)  # a run of ours never refilled
    assert rows["CPU s at rest"] == (0.0, 0.0, None)  # nothing to divide by


def test_the_releases_requests_are_told_apart_by_the_program_that_made_them() -> None:
    at = "2026-12-05T08:00:00.5Z"
    window = {"fill": (datetime(2026, 12, 5, 8, tzinfo=UTC), datetime(2026, 12, 5, 9, tzinfo=UTC))}
    events = [
        {
            "requestReceivedTimestamp": at,
            "verb": "create",
            "user": {"username": "admin"},
            "userAgent": "controller/v0.0.0 (linux/amd64) kubernetes/$Format",
            "objectRef": {"resource": "secrets"},
        },
        {
            "requestReceivedTimestamp": at,
            "verb": "create",
            "user": {"username": "admin"},
            "userAgent": "OpenAPI-Generator/37.0.2/python",
            "objectRef": {"resource": "secrets"},
        },
    ]
    counts = audit_requests(events, window, who=agent)["fill"]
    assert counts == Counter(
        {("controller", "create", "secrets"): 1, ("OpenAPI-Generator", "create", "secrets"): 1}
    )
    run = Run("ours", pools=1, refill_pools=1, fill_s=4.0, filled=2, release_requests=6)
    assert figures(run)["the release's requests per instance in the fill"] == 3.0
    assert figures(run)["the release's requests per s in the fill"] == 1.5


def test_the_release_alone_is_the_baseline_each_fill_is_set_over() -> None:
    bodies = bare_exporters("vs-alone", 4)
    assert [b["metadata"]["labels"]["pool"] for b in bodies] == ["p0", "p0", "p1", "p1"]
    assert {b["kind"] for b in bodies} == {"Exporter"} and all(b["spec"] == {} for b in bodies)
    runs = [Run("theirs", 2, 1, fill_s=30.0), Run("ours", 2, 1, fill_s=24.0)]
    line = alone_line(Alone(4, issued_s=20.0, requests=8), runs)
    assert "every credential issued in 20.0 s" in line
    assert "2.00 per Exporter, 0.40 per s" in line
    assert line.endswith("theirs 1.50, ours 1.20.")
