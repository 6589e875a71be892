"""200 Leases at once against pools with a warm buffer: no pool ever exceeds maxReplicas
(a watch records every Exporter as it appears), and every Lease that fits under the
ceilings gets an instance.

Jumpstarter's released 0.9.0 controller serves the namespace, and the Leases are what the
release's client library asks for (`jmp create lease -l pool=P`, in this process, 20 in
flight at a time, as many clients at once). That controller ends at once a Lease
that no enabled Exporter matches (Unsatisfiable): the pools have their warm instances
before the burst. No exporter runs for them (no `jmp run`), so the controller assigns
none and every Lease pends (Pending, Offline) on its pool's instances, all of them pending
demand the pools scale on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.jumpstarter import Jumpstarter
from harness.stack import running_reconciler
from tests.census import Census
from tests.chaos.support import until
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class

# The fill's wait below is bounded, not timed; the test's own bound leaves room for it.
pytestmark = pytest.mark.timeout(600)

WARM = 2
FILL_TIMEOUT_S = 300
# pool -> (maxReplicas, Leases): three pools meet their ceiling, one does not.
POOLS = {"p0": (20, 60), "p1": (20, 60), "p2": (20, 60), "p3": (30, 20)}


def lease_states(plane: ControlPlane, ns: str) -> Counter[tuple[str, ...]]:
    """The Leases of `ns` by what Jumpstarter's controller says of them: its true
    conditions (type and reason), `ended` and `exporterRef` ("" when unset)."""
    states: Counter[tuple[str, ...]] = Counter()
    for item in get_json(plane, "leases.jumpstarter.dev", "-n", ns)["items"]:
        status: dict[str, Any] = item.get("status") or {}
        true = sorted(
            f"{c['type']}/{c.get('reason', '')}"
            for c in status.get("conditions") or []
            if c.get("status") == "True"
        )
        ended = "ended" if status.get("ended") else ""
        exporter = str((status.get("exporterRef") or {}).get("name") or "")
        states[(*true, ended, exporter)] += 1
    return states


def test_200_leases_at_once_stay_under_every_ceiling(
    plane: ControlPlane,
    namespace: str,
    jumpstarter: Jumpstarter,
    tmp_path: Path,
    recovery: Callable[[str, float], None],
) -> None:
    ns = namespace
    apply(plane, virtual_target_class("qemu", ns))
    for pool, (ceiling, _) in POOLS.items():
        apply(
            plane,
            exporter_set(
                pool,
                ns,
                class_name="qemu",
                labels={"pool": pool},
                with_template=True,
                minAvailableReplicas=WARM,
                maxReplicas=ceiling,
            ),
        )
    census = Census(plane, ns)
    extra = ["--namespace", ns, "--no-leader-election"]
    try:
        with running_reconciler(plane, tmp_path, extra=extra) as reconciler:
            until("the warm buffers", lambda: all(census.now[p] == WARM for p in POOLS), 60)
            jumpstarter.client_config("dev")  # the Client, made before the clock starts
            burst = [
                (f"pool={pool}", f"{pool}-lease-{i}")
                for pool, (_, count) in POOLS.items()
                for i in range(count)
            ]
            assert len(burst) == 200
            started = time.monotonic()
            jumpstarter.request_leases(burst)
            asked = time.monotonic() - started
            # busy 0 + warm 2 + pending Leases, capped by the ceiling
            wanted = {pool: min(WARM + count, ceiling) for pool, (ceiling, count) in POOLS.items()}

            def filled() -> bool:
                now = dict(census.now)
                assert now == wanted, f"instances {now}, wanted {wanted}, most {dict(census.most)}"
                return True

            # Bounded, not timed: 34 s alone, 129 s was not enough once under a loaded run.
            until("every Lease that fits has its instance", filled, FILL_TIMEOUT_S)
            recovery("200 Leases: every pool at its wanted size", time.monotonic() - started)
            # Every Lease pends on its pool's instances, none of them online: what
            # Jumpstarter's controller says of each, once it has been through them all.
            pending = {("Pending/Offline", "", ""): 200}
            until("the controller pends every Lease", lambda: lease_states(plane, ns) == pending,
                  60)  # fmt: skip
            time.sleep(2)  # a few more passes
            assert lease_states(plane, ns) == pending
            assert dict(census.now) == wanted
            assert all(census.most[p] <= POOLS[p][0] for p in POOLS), dict(census.most)
            reconciler.check_alive()
            jumpstarter.check_alive()
            first = get_json(plane, "leases.jumpstarter.dev", "p0-lease-0", "-n", ns)
            said = [(c["type"], c["reason"], c["message"]) for c in first["status"]["conditions"]]
            print(f"\n200 Leases asked of Jumpstarter's controller in {asked:.1f} s")
            print(f"p0-lease-0, as the controller left it: {said}")
    finally:
        census.stop()
