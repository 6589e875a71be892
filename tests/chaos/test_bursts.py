"""200 Leases at once against pools with a warm buffer: no pool ever exceeds maxReplicas
(a watch records every Exporter as it appears), and every Lease that fits under the
ceilings gets an instance."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness.controlplane import ControlPlane
from harness.stack import running_reconciler
from tests.census import Census
from tests.chaos.support import until
from tests.e2e.objects import apply, exporter_set, lease, virtual_target_class

WARM = 2
# pool -> (maxReplicas, Leases): three pools meet their ceiling, one does not.
POOLS = {"p0": (20, 60), "p1": (20, 60), "p2": (20, 60), "p3": (30, 20)}


def test_200_leases_at_once_stay_under_every_ceiling(
    plane: ControlPlane, namespace: str, tmp_path: Path, recovery: Callable[[str, float], None]
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
            burst = [
                lease(f"{pool}-lease-{i}", ns, {"pool": pool})
                for pool, (_, count) in POOLS.items()
                for i in range(count)
            ]
            assert len(burst) == 200
            started = time.monotonic()
            apply(plane, *burst)
            # busy 0 + warm 2 + pending Leases, capped by the ceiling
            wanted = {pool: min(WARM + count, ceiling) for pool, (ceiling, count) in POOLS.items()}
            until("every Lease that fits has its instance", lambda: dict(census.now) == wanted, 120)
            recovery("200 Leases: every pool at its wanted size", time.monotonic() - started)
            time.sleep(2)  # a few more passes
            assert dict(census.now) == wanted
            assert all(census.most[p] <= POOLS[p][0] for p in POOLS), dict(census.most)
            reconciler.check_alive()
    finally:
        census.stop()
