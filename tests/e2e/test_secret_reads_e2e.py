"""A cluster-wide reconciler's reads of Secrets, counted by kube-apiserver itself (its
audit log of every request, and `apiserver_request_total`):

- at rest they follow the resync budget, not the number of Secrets tracked: the one read
  longest ago goes first, so no Secret is read again before every other tracked one has
  been (with a floor of 1 s, 20 tracked Secrets read each on its own period would be 20
  reads a second, each Secret every second); the rate against the budget of 1 read a
  second is printed;
- no write at rest;
- a rotated token still reaches the config Secret: by the resync (by design within the
  floor plus Secrets / budget, and a pass: printed), and, when the instance's Pod is made
  again, before that Pod is created (both Secrets are read right before it: `jmp run`
  reads its config once).

Jumpstarter's released 0.9.0 controller serves the namespace: it issues the credentials and
rotates one as it does (its Secret deleted, a new one issued). No exporter runs.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench._apiserver import WRITE_VERBS, audit_requests, request_totals
from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import running_jumpstarter
from harness.stack import running_reconciler
from pool.model.jumpstarter import CONFIG_KEY, config_secret_name
from tests.chaos.support import identity
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    rotate_credential,
    virtual_target_class,
    wait_for,
)

NS = "reads"
POOLS, INSTANCES = 5, 2  # 10 instances: 20 Secrets tracked by name
FLOOR, BUDGET = 1.0, 1.0  # --secret-resync, --secret-resync-budget
WINDOW = 12.0  # seconds at rest, counted


def _config_token(plane: Any, exporter: str) -> str:
    found = get_json(plane, "secret", config_secret_name(exporter), "-n", NS)
    config = yaml.safe_load(base64.b64decode(found["data"][CONFIG_KEY]))
    return str(config["token"])


def _secret_reads(plane: ControlPlane, user: str, start: datetime, end: datetime) -> list[str]:
    """The names of the Secrets `user` read (get) in [start, end), in the order the
    apiserver received the reads, by its audit log."""
    reads = [
        (datetime.fromisoformat(e["requestReceivedTimestamp"]), e["objectRef"]["name"])
        for e in plane.iter_audit_events()
        if e["user"]["username"] == user
        and e["verb"] == "get"
        and (e.get("objectRef") or {}).get("resource") == "secrets"
    ]
    return [name for at, name in sorted(reads) if start <= at < end]


def _pods(plane: Any) -> dict[str, str]:
    """Pod name -> uid."""
    items = get_json(plane, "pods", "-n", NS)["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane of its own that audits reads, its namespace NS served by Jumpstarter's
    released controller and router."""
    with running_control_plane(audit_reads=True) as plane:
        plane.kubectl("create", "namespace", NS)
        with running_jumpstarter(plane, NS, tmp_path / "jumpstarter"):
            yield plane


def test_reads_at_rest_follow_the_budget_and_a_rotated_token_still_arrives(
    plane: ControlPlane, tmp_path: Path
) -> None:
    plane.kubectl("create", "namespace", "identities")
    kubeconfig = identity(plane, "identities", "reconciler", tmp_path)
    user = "system:serviceaccount:identities:reconciler"
    for index in range(POOLS):
        name = f"pool-{index}"
        apply(
            plane,
            virtual_target_class(name, NS),
            exporter_set(name, NS, class_name=name, with_template=True, minReplicas=INSTANCES),
        )
    extra = [
        "--no-leader-election",
        f"--secret-resync={FLOOR}",
        f"--secret-resync-budget={BUDGET}",
    ]
    with running_reconciler(plane, tmp_path, kubeconfig=kubeconfig, extra=extra) as rec:

        def filled() -> bool:
            rec.check_alive()
            exporters = get_json(plane, "exporters", "-n", NS)["items"]
            names = {e["metadata"]["name"] for e in exporters}
            return len(names) == POOLS * INSTANCES and names <= set(_pods(plane))

        wait_for("the pools filled", filled, timeout=90)
        time.sleep(3)  # the last passes and first reads end

        # At rest: the reconciler's requests, as the apiserver saw them.
        before = request_totals(plane)
        start = datetime.now(UTC)
        time.sleep(WINDOW)
        end = datetime.now(UTC)
        served = request_totals(plane)
        counts = audit_requests(plane.iter_audit_events(), {"rest": (start, end)})["rest"]
        mine = {k[1:]: n for k, n in counts.items() if k[0] == user}
        reads = mine.get(("get", "secrets"), 0)
        writes = sum(n for (verb, _), n in mine.items() if verb in WRITE_VERBS)
        tracked = 2 * POOLS * INSTANCES
        order = _secret_reads(plane, user, start, end)
        span = (end - start).total_seconds()
        print(
            f"\nat rest for {span:.1f} s: {reads} Secret reads by the reconciler, "
            f"{reads / span:.2f} a second (budget {BUDGET:.0f}/s; {tracked} Secrets each read "
            f"every {FLOOR:.0f} s would be {tracked / FLOOR * span:.0f}); its requests: {mine}"
        )
        assert order and len(order) == reads, (order, mine)  # the resync runs at rest
        # The Secret read longest ago goes first: none is read again before every other
        # tracked one has been (a bound by the Secrets tracked, not by the seconds).
        again = [n for i, n in enumerate(order) if n in order[max(0, i - tracked + 1) : i]]
        assert not again, order
        assert writes == 0, mine
        # The server's own counter saw at least those reads (and the test's none).
        assert served["GET", "secrets"] - before["GET", "secrets"] >= reads

        # A rotated token, no event: the resync brings it.
        exporters = sorted(_pods(plane))
        first, second = exporters[0], exporters[1]
        token = rotate_credential(plane, NS, first)
        started = time.monotonic()  # from the new credential on: the reconciler's part
        bound = FLOOR + tracked / BUDGET  # the resync's, then a pass
        wait_for(
            "the rotated token in the config Secret (resync)",
            lambda: _config_token(plane, first) == token,
            timeout=90,
        )
        took = time.monotonic() - started
        print(
            f"rotated token in the config Secret after {took:.2f} s (the resync's bound "
            f"{bound:.0f} s, then a pass)"
        )

        # A rotated token and the instance's Pod made again: read before the Pod.
        old_uid = _pods(plane)[second]
        token = rotate_credential(plane, NS, second)
        plane.kubectl("delete", "pod", second, "-n", NS, "--wait=false")
        wait_for(
            "a new Pod for the instance",
            lambda: _pods(plane).get(second, old_uid) != old_uid,
            timeout=30,
        )
        assert _config_token(plane, second) == token
        events = [e for e in plane.audit_events() if e["user"]["username"] == user]
        config_written = [
            e["stageTimestamp"]
            for e in events
            if e["verb"] == "update"
            and (e.get("objectRef") or {}).get("name") == config_secret_name(second)
        ]
        pod_created = [
            e["requestReceivedTimestamp"]
            for e in events
            if e["verb"] == "create"
            and (e.get("objectRef") or {}).get("resource") == "pods"
            and (e.get("objectRef") or {}).get("name") == second
        ]
        assert config_written and pod_created, json.dumps(events[-20:], indent=1)
        assert max(config_written) <= max(pod_created)
