"""The leader's renewals against a real apiserver: one update each while nothing else
writes its Lease (client-go's fast path), and a read first when something did."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from pool.model.access import ELECTION_LEASES
from reconciler.runtime.kube import Kube
from reconciler.runtime.leader import ElectionConfig, Elector

pytestmark = pytest.mark.e2e


class CountingKube(Kube):
    """The requests sent, by method."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.sent: Counter[str] = Counter()

    def _call(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        self.sent[method] += 1
        return super()._call(method, path, *args, **kwargs)


def test_the_holder_renews_with_one_update_and_reads_only_after_another_write(
    control_plane: ControlPlane, namespace: str
) -> None:
    kube = CountingKube(control_plane.api_client())
    config = ElectionConfig(namespace=namespace, identity="first")
    elector = Elector(kube, config)
    assert elector._attempt()  # not there yet: a read, then the create
    assert kube.sent == {"GET": 1, "POST": 1}
    for _ in range(5):
        assert elector._attempt()
    assert kube.sent == {"GET": 1, "POST": 1, "PUT": 5}  # no read before a renewal
    renewed = kube.get(ELECTION_LEASES, namespace, config.name)
    assert renewed is not None
    assert renewed["spec"]["holderIdentity"] == "first"
    assert renewed["spec"]["leaseTransitions"] == 0
    # Another write (here a label) makes the held copy stale: the update is refused, the
    # next read finds the Lease still ours, and the renewal goes on from it.
    renewed["metadata"].setdefault("labels", {})["touched"] = "yes"
    kube.update(ELECTION_LEASES, namespace, config.name, renewed)
    kube.sent.clear()
    assert elector._attempt()
    assert kube.sent == {"PUT": 2, "GET": 1}
    after = kube.get(ELECTION_LEASES, namespace, config.name)
    assert after is not None
    assert after["metadata"]["labels"] == {"touched": "yes"}
    assert after["spec"]["holderIdentity"] == "first"
    # A candidate that took the Lease over (as after our pause) is never overwritten: our
    # stale update is refused and the read shows the other holder.
    after["spec"]["holderIdentity"] = "second"
    kube.update(ELECTION_LEASES, namespace, config.name, after)
    assert not elector._attempt()
    taken = kube.get(ELECTION_LEASES, namespace, config.name)
    assert taken is not None and taken["spec"]["holderIdentity"] == "second"
