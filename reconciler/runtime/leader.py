"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

Only the holder of the Lease reconciles, so two replicas never race on the same pool.
A candidate takes the Lease when it is free or its holder has not renewed within
`lease_duration`; the holder renews every `retry_period` and gives up (the process
stops reconciling) when it cannot renew within `renew_deadline`. Every write is an
update with the read resourceVersion, so two candidates cannot both win. On graceful
shutdown the holder releases the Lease so a successor need not wait for it to expire.

The holder renews as client-go's "fast path" does: an update of the Lease as its last
write returned it, with no read before, while that renewal is within `lease_duration`;
any other write since makes the resourceVersion stale, the update is refused (409), and
the next attempt reads first. At rest that is one request per `retry_period`, not two.

`may_write` is what client-go lacks: the holder knows when it last renewed (the moment
it wrote into `renewTime`, on its monotonic clock), and stops writing `renew_deadline`
after it, whether or not its renewal thread has noticed yet. A successor takes over only
`lease_duration` after that `renewTime`, so a leader paused (SIGSTOP, a long GC, a frozen
VM) and resumed past its lease finds its writes refused before any is sent; the margin is
`lease_duration - renew_deadline` (5 s by default), less the clock skew between nodes.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from api.provisioners.qemu import PROVISIONER as QEMU
from pool.model.access import ELECTION_LEASES
from pool.model.timefmt import parse_time
from reconciler.runtime.kube import ApiError, Kube

__all__ = [
    "ELECTION_ID_PREFIX",
    "QEMU_ELECTION_ID",
    "ElectionConfig",
    "Elector",
    "default_election_id",
    "default_identity",
    "election_id",
]

log = logging.getLogger("reconciler.leader")  # stable: log filters select by it

ELECTION_ID_PREFIX = "exporter-set-controller-"
# `virtualtarget reconcile`'s QEMU Lease from before each provisioner had its own, kept:
# renamed, an upgrade's new replicas would lead beside the old leader on the old name.
QEMU_ELECTION_ID = "exporterset-reconciler"


def election_id(provisioner: str) -> str:
    """The election Lease of `provisioner`'s reconcilers: the one Jumpstarter's own
    exporter-set controller takes for it, so two controllers of one provisioner in one
    namespace never lead at once, and those of two provisioners never wait on each other."""
    return ELECTION_ID_PREFIX + provisioner


def default_election_id(provisioner: str) -> str:
    """`virtualtarget reconcile`'s `--leader-election-id` when none is given:
    `election_id`, but QEMU's kept name (`QEMU_ELECTION_ID`)."""
    return QEMU_ELECTION_ID if provisioner == QEMU else election_id(provisioner)


def default_identity() -> str:
    """`<hostname>_<uuid>`, as controller-runtime's leader election names a candidate
    (`leaderelection.NewResourceLock`), so the election Lease reads the same whoever holds it."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str = QEMU_ELECTION_ID
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class Elector:
    def __init__(
        self,
        kube: Kube,
        config: ElectionConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube, self.config, self.clock = kube, config, clock
        self.identity = config.identity or default_identity()
        self.leading = threading.Event()
        self._renewed_at = float("-inf")  # monotonic time of the renewTime last written
        self._written: dict[str, Any] | None = None  # the Lease as our last write returned it

    def may_write(self) -> bool:
        """Leading, and within `renew_deadline` of the last renewal that succeeded."""
        return (
            self.leading.is_set()
            and time.monotonic() - self._renewed_at < self.config.renew_deadline
        )

    def _spec(self, now: datetime, acquired: str | None, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": acquired or _micro(now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the Lease afterwards."""
        ns, name, now = self.config.namespace, self.config.name, self.clock()
        written, self._written = self._written, None
        if written is not None and self._lease_valid():
            spec = written.get("spec") or {}
            written["spec"] = self._spec(
                now, spec.get("acquireTime"), int(spec.get("leaseTransitions") or 0)
            )
            try:
                self._written = self.kube.update(ELECTION_LEASES, ns, name, written)
                return True
            except ApiError as exc:  # another write since ours: read it, below
                log.info("leader election: renewal without a read refused (%s)", exc.status)
        current = self.kube.get(ELECTION_LEASES, ns, name)
        if current is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": ns},
                "spec": self._spec(now, None, 0),
            }
            try:
                self._written = self.kube.create(ELECTION_LEASES, ns, body)
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
            return True
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity:
            renewed = spec.get("renewTime")
            duration = timedelta(seconds=spec.get("leaseDurationSeconds") or 0)
            if renewed and parse_time(renewed) + duration > now:
                return False
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        current["spec"] = self._spec(now, spec.get("acquireTime") if ours else None, transitions)
        try:
            self._written = self.kube.update(ELECTION_LEASES, ns, name, current)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote it first
                return False
            raise
        return True

    def _lease_valid(self) -> bool:
        """Our last renewal is younger than the Lease's duration: nobody may have taken it."""
        return time.monotonic() - self._renewed_at < self.config.lease_duration

    def release(self) -> None:
        """Give the Lease up (graceful shutdown), if still ours."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        self._written = None
        try:
            current = self.kube.get(ELECTION_LEASES, self.config.namespace, self.config.name)
            if current and (current.get("spec") or {}).get("holderIdentity") == self.identity:
                current["spec"]["holderIdentity"] = ""
                current["spec"]["leaseDurationSeconds"] = 1
                self.kube.update(ELECTION_LEASES, self.config.namespace, self.config.name, current)
        except Exception as exc:  # best effort: the Lease expires anyway
            log.warning("could not release the leader Lease: %s", exc)

    def _attempt(self) -> bool:
        started = time.monotonic()  # before the renewTime it writes: the safe side
        try:
            won = self.try_acquire_or_renew()
        except Exception as exc:
            log.warning("leader election: %s", exc)
            return False
        if won:
            self._renewed_at = started
        return won

    def run(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Campaign until leading, then renew until `stop`; call `on_lost` if renewal fails."""
        while not stop.is_set():
            if self._attempt():
                log.info("leader election: %s is the leader", self.identity)
                self.leading.set()
                break
            stop.wait(self.config.retry_period)
        last_renewed = self.clock()
        while not stop.wait(self.config.retry_period):
            if self._attempt():
                last_renewed = self.clock()
            elif (self.clock() - last_renewed).total_seconds() > self.config.renew_deadline:
                log.error("leader election: lost the Lease")
                self.leading.clear()
                on_lost()
                return
