"""Lease protection: an instance that serves a lease is not deleted under its user.

As `kubernetes.io/pvc-protection` keeps a PersistentVolumeClaim that a Pod uses, the
finalizer LEASE_PROTECTION keeps an Exporter while it is busy (`pool.rules.buckets`:
leased, in a lease hook, or owing its afterLease hook). The pool adds it when an instance
becomes busy and takes it off when it stops being busy, so a steady pool carries it only
on the instances serving now. Deleting the ExporterSet (the garbage collector then
deletes its Exporters), or an Exporter itself, leaves a busy instance terminating but
serving, its Pod and Secrets with it, until its lease ends; then the finalizer goes and
the garbage collector removes the rest.

The bound: an instance is held at most `PROTECTION_BOUND` after its deletion was asked
for, whatever its lease (a Lease that never ends, Jumpstarter's controller gone). Each
release of a deleted instance is an Event saying why; one the bound let go is a Warning.

Pure: the views in, verdicts out. The planner applies `verdict` to a pool's own
instances; the runtime applies it to `leftovers`, the instances a set no longer controls
(it was deleted, or deleted with `--cascade=orphan`, or made again under the same name).
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pool.model.timefmt import format_duration, format_time
from pool.model.views import ExporterView, LeaseView
from pool.rules.buckets import is_busy

__all__ = ["PROTECTION_BOUND", "Verdict", "busy_lease", "leased_names", "verdict"]

PROTECTION_BOUND = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with an instance's protection: `protect` (add the finalizer), `release`
    (take it off, `why`; `warning` when a lease still holds it), or neither, and while a
    deleted instance is held, until when at most (`until`)."""

    protect: bool = False
    release: bool = False
    why: str = ""
    warning: bool = False
    until: datetime | None = None


def leased_names(leases: Iterable[LeaseView]) -> dict[str, str]:
    """Exporter name -> the Lease that holds it, for the Leases that have not ended."""
    return {lease.exporter: lease.name for lease in leases if lease.exporter and not lease.ended}


def busy_lease(exporter: ExporterView, leased_by: dict[str, str]) -> str:
    """What keeps the instance busy, in words ("lease lab-1", "a lease hook")."""
    lease = exporter.lease_ref or leased_by.get(exporter.name, "")
    return f"lease {lease}" if lease else "a lease hook"


def verdict(
    exporter: ExporterView,
    leased: Container[str],
    lease: str,
    now: datetime,
    bound: timedelta = PROTECTION_BOUND,
) -> Verdict:
    """The protection step of one instance (`lease`: `busy_lease`'s words for it)."""
    busy = is_busy(exporter, leased)
    if busy and not exporter.protected and not exporter.deleting:
        return Verdict(protect=True, why=f"serves {lease}")
    if not exporter.protected:
        return Verdict()
    if not busy:
        return Verdict(release=True, why="no lease holds it any more")
    if exporter.deleted_at is None:
        return Verdict()
    until = exporter.deleted_at + bound
    if now >= until:
        why = f"held {format_duration(bound)} since its deletion; {lease} still holds it"
        return Verdict(release=True, why=why, warning=True)
    return Verdict(why=f"kept until {lease} ends, at most until {format_time(until)}", until=until)
