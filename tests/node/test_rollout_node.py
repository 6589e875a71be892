"""A rollout with Pods that really run: a pool of three, one instance leased, gets a new
exporter image (the QEMU exporter image this project ships, imported under a new tag).
The idle instances are replaced one at a time, each removed only once its replacement
registered from inside its Pod; the leased one keeps its uid until its release, then is
replaced. Prints the time from the edit to the last idle instance replaced and the
lowest available count seen (a bounded poll, never a timing assertion).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.jumpstarter import JumpstarterSupply
from pool.model.keys import REVISION
from tests.node.pool_support import Pool, fresh_pool
from tests.node.support import record_figure

pytestmark = pytest.mark.timeout(900)

NEW_IMAGE = QEMU_EXPORTER_IMAGE.rsplit(":", 1)[0] + ":rollout"
CEILING, WARM = 4, 2


@pytest.fixture(scope="module")
def new_image(node_cluster: Any, instance_archives: dict[str, Path], instance_images: None) -> str:
    """The same image under a new tag: a new revision whose Pods run as well."""
    return str(node_cluster.import_image(instance_archives[QEMU_EXPORTER_IMAGE], NEW_IMAGE))


class Sampler:
    """The most instances and the fewest available ones the set's status shows."""

    def __init__(self, pool: Pool) -> None:
        self.pool, self.stop = pool, threading.Event()
        self.most_owned, self.fewest_available = 0, 1 << 30
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            status = self.pool.status()
            self.most_owned = max(self.most_owned, int(status.get("replicas", 0)))
            available = int(status.get("availableReplicas", 0))
            self.fewest_available = min(self.fewest_available, available)


def _uids(pool: Pool) -> dict[str, str]:
    return {
        e["metadata"]["uid"]: e["metadata"]["name"]
        for e in pool.exporters()
        if not e["metadata"].get("deletionTimestamp")
    }


def _revisions(pool: Pool) -> set[str]:
    return {e["metadata"].get("annotations", {}).get(REVISION, "") for e in pool.exporters()}


@pytest.fixture
def pool(node_cluster: Any, jumpstarters: JumpstarterSupply, tmp_path: Path) -> Iterator[Pool]:
    with fresh_pool(node_cluster, jumpstarters, tmp_path) as running:
        yield running


def test_a_new_image_rolls_out_one_at_a_time_around_a_lease(pool: Pool, new_image: str) -> None:
    shape = {"minReplicas": 3, "maxReplicas": CEILING, "minAvailableReplicas": WARM}
    pool.apply(None, recycleStrategy="InPlaceReuse", **shape)
    pool.wait_warm(3, timeout=300)
    before = _uids(pool)
    leased_uid, leased = min(before.items(), key=lambda item: item[1])
    pool.lease("lab-1", exporter=leased)
    pool.wait("the lease seen", lambda: pool.status().get("leasedReplicas") == 1)
    idle, old = set(before) - {leased_uid}, _revisions(pool)
    sampler = Sampler(pool)
    try:
        edited = time.monotonic()
        pool.patch_set({"spec": {"images": {"exporter": {"image": new_image}}}})
        pool.wait("both idle instances replaced", lambda: not idle & set(_uids(pool)), 600)
        idle_done = time.monotonic() - edited
        assert _uids(pool).get(leased_uid) == leased, "the leased instance was touched"
        pool.wait("the replacements warm", lambda: pool.status().get("availableReplicas") == 2)
        lowest, most = sampler.fewest_available, sampler.most_owned
        pool.release("lab-1")
        pool.wait("the released instance replaced", lambda: leased_uid not in _uids(pool), 300)
        pool.wait_warm(3, timeout=300)
        assert not _revisions(pool) & old
    finally:
        sampler.stop.set()
    record_figure(
        f"rollout of a new image to 3 instances (1 leased, InPlaceReuse): last idle one "
        f"replaced {idle_done:.1f} s after the edit; lowest available {lowest} (warm buffer "
        f"{WARM}); most instances {most} (maxReplicas {CEILING})"
    )
    assert lowest >= WARM and most <= CEILING
