"""What `virtualtarget plan` prints, as text and as the documented JSON shape."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from api.warmbuffer import WarmBufferSettings
from pool.model.views import LeaseView, Observation
from pool.rules.planner import plan
from pool.rules.planreport import JSON_SHAPE, SetPlan, as_json, as_text
from tests.unit.test_reconciler_planner import run
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready

WAITING = {"pool-1": "no status.credential and status.endpoint yet"}


def test_text_shows_buckets_desired_steps_and_waiting_instances() -> None:
    result = run([booting("pool-0"), booting("pool-1")], pods=False, awaiting=WAITING)
    planned = SetPlan("ns", "pool", "qemu", result, WAITING)
    skipped = SetPlan("ns", "gpu", "gpu", skipped="its class names provisioner x, not y")
    assert as_text([planned, skipped], "any namespace").splitlines() == [
        "ns/pool  class qemu  desired 2  pending leases 0",
        "  buckets   terminating 0, failed 0, draining 0, busy 0, released 0, available 0, "
        "provisioning 2, standby 0",
        "  steps     create pod pool-0: credentials issued, no Pod yet",
        "            record event: WaitingForCredentials, 1 instance(s) wait for credentials "
        "from Jumpstarter's controller; pool-1: no status.credential and status.endpoint yet",
        "            update status",
        "            record event: ExporterSetProgressing, Progressing True "
        "(WaitingForCredentials): 1 instance(s) wait for credentials from Jumpstarter's "
        "controller; pool-1: no status.credential and status.endpoint yet",
        "  awaiting  pool-1: no status.credential and status.endpoint yet",
        "",
        "ns/gpu  class gpu  skipped: its class names provisioner x, not y",
    ]
    assert as_text([], 'namespace "lab"') == 'no ExporterSets in namespace "lab"'


def test_json_output_has_the_documented_shape() -> None:
    documented = json.loads(re.sub(r"#.*", "", JSON_SHAPE))
    planned = SetPlan("ns", "pool", "qemu", run([], min_available=2))
    skipped = SetPlan("ns", "gpu", "gpu", skipped="its class names provisioner x, not y")
    printed = json.loads(as_json([planned, skipped], T0, "qemu.jumpstarter.dev"))
    assert printed.keys() == documented.keys()
    for entry in printed["sets"]:
        assert entry.keys() == documented["sets"][0].keys()
    assert printed["sets"][0]["buckets"].keys() == documented["sets"][0]["buckets"].keys()
    assert printed["sets"][0]["steps"][0] == documented["sets"][0]["steps"][0]
    assert printed["sets"][1]["skipped"] and printed["sets"][1]["steps"] == []
    assert printed["sets"][1]["buckets"] is None


def test_an_auto_pool_prints_its_demand_and_a_scheduled_lease_its_moment() -> None:
    match = {"matchLabels": {"board": "qemu"}}
    leases = [LeaseView(f"l{i}", match, exporter=f"x{i}", created=T0) for i in range(10)]
    leases.append(LeaseView("later", match, created=T0, begin=T0 + timedelta(hours=1)))
    auto = WarmBufferSettings(auto=True, boot_estimate=timedelta(minutes=3))
    result = run([], leases=leases, sizing=auto, now=T0 + timedelta(seconds=30))
    text = as_text([SetPlan("ns", "pool", "qemu", result)], "any namespace")
    assert result.demand is not None
    assert f"  demand    {result.demand.reason()}" in text.splitlines()
    assert "waiting at 2026-01-01T00:57:00Z: scheduled lease later begins at" in text
    printed = json.loads(as_json([SetPlan("ns", "pool", "qemu", result)], T0, "q"))
    documented = json.loads(re.sub(r"#.*", "", JSON_SHAPE))["sets"][0]["demand"]
    assert printed["sets"][0]["demand"].keys() == documented.keys()
    assert printed["sets"][0]["demand"]["warmBuffer"] == result.warm


def test_a_rollout_lists_the_outdated_instances_and_what_each_waits_for() -> None:
    leased = ready("pool-0", revision="old.", lease_ref="lab-1", exporter_status="LeaseReady")
    obs = Observation(
        pool(min_available=1, revision="new"),
        klass(),
        (leased, ready("pool-1", revision="old.")),
        leases=(LeaseView("lab-1", {}, "pool-0"),),
    )
    result = plan(obs, T0)
    text = as_text([SetPlan("ns", "pool", "qemu", result)], "ns").splitlines()
    at = text.index("  outdated  pool-0: its lease: lease lab-1 must end")
    assert text[at + 1] == "            pool-1: a replacement for pool-1 is created"
    document = json.loads(as_json([SetPlan("ns", "pool", "qemu", result)], T0, "q"))
    assert document["sets"][0]["outdated"][0] == {
        "name": "pool-0",
        "waitsFor": "its lease: lease lab-1 must end",
    }
