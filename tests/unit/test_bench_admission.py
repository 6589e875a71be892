"""The admission benchmark reads both sides' metrics and sends what it says it sends."""

from __future__ import annotations

from bench.admission import (
    ABSENT,
    APISERVER_FAMILY,
    CLASS,
    STEPS,
    WEBHOOK_ONLY,
    mean_per_call,
    parse_metrics,
    step_requests,
)

F = APISERVER_FAMILY
V = 'name="v",operation="CREATE",type="validating"'
M = 'name="m",operation="UPDATE",type="admit",rejected="false"'
EXPOSITION = f"""\
# HELP {F} ...
{F}_bucket{{{V},rejected="false",le="0.005"}} 3
{F}_sum{{{V},rejected="false"}} 0.003
{F}_count{{{V},rejected="false"}} 3
{F}_sum{{{V},rejected="true"}} 0.002
{F}_count{{{V},rejected="true"}} 1
{F}_sum{{{M}}} 0.5
{F}_count{{{M}}} 1
"""


def test_sums_and_counts_per_label_set_with_rejections_folded_in() -> None:
    parsed = parse_metrics(EXPOSITION, APISERVER_FAMILY)
    key = "name=v,operation=CREATE,type=validating"
    assert parsed[("sum", key)] == 0.005
    assert parsed[("count", key)] == 4
    assert ("count", "name=m,operation=UPDATE,type=admit") in parsed
    assert not any(k[0] == "bucket" for k in parsed)


def test_mean_per_call_between_two_scrapes_over_matching_label_sets() -> None:
    before = parse_metrics(EXPOSITION, APISERVER_FAMILY)
    after = {k: v * 2 for k, v in before.items()}
    calls, mean = mean_per_call(before, after, "operation=CREATE")
    assert calls == 4 and abs(mean - 0.005 / 4) < 1e-12
    assert mean_per_call(before, before, "operation=CREATE") == (0.0, 0.0)


def test_every_step_sends_one_request_per_name() -> None:
    for kind, op in STEPS:
        requests = step_requests(kind, op, ["a", "b"])
        assert len(requests) == 2
        assert all(
            kind.lower() in r.path.replace("virtualtargetclasses", "virtualtargetclass")
            or "exportersets" in r.path
            for r in requests
        )
    (absent,) = step_requests("ExporterSet", "create, class absent", ["a"])
    assert absent.body["spec"]["virtualTargetClassName"] == ABSENT
    (plain,) = step_requests("ExporterSet", "create", ["a"])
    assert plain.body["spec"]["virtualTargetClassName"] == CLASS
    assert plain.body["spec"]["template"]["metadata"]["labels"]["jumpstarter.dev/pool"] == "a"
    (bare,) = step_requests("ExporterSet", "create, template without labels", ["a"])
    assert "labels" not in bare.body["spec"]["template"]["metadata"]
    assert set(WEBHOOK_ONLY) <= set(STEPS)
