"""Which revision a pool renders now, and which of its instances are outdated.

An instance carries the revision it was rendered from (REVISION): the digest of the
set's spec without the fields that render nothing (the scaling fields, the selector) and
of the class's spec without bindingMode and reclaimPolicy (`pool.model.adapt`).
An instance of another revision is outdated; one that carries none (made by an earlier
version, or by Jumpstarter's own controller) counts as current, and so does one carrying
the digest earlier versions computed of the same specs (they hashed every field), so an
upgrade of the reconciler rolls nothing out. Pure; no I/O.
"""

from __future__ import annotations

from pool.model.views import ClassView, ExporterView, PoolView

__all__ = [
    "ROLLOUT_REMOVAL",
    "current_revisions",
    "fenced_by_rollout",
    "is_outdated",
    "revision_of",
]

# How the why of every removal a rollout makes begins; on a fenced instance (FENCED_FOR)
# it says the fence was the rollout's, which a pause lifts.
ROLLOUT_REMOVAL = "outdated; "


def revision_of(pool: PoolView, klass: ClassView | None) -> str:
    """The revision an instance created now is rendered from."""
    return f"{pool.revision}.{klass.revision}" if klass is not None else pool.revision


def current_revisions(pool: PoolView, klass: ClassView | None) -> frozenset[str]:
    """The revisions that count as current: none recorded, this one, its legacy digest."""
    legacy = pool.legacy_revision
    if klass is not None and legacy:
        legacy = f"{legacy}.{klass.legacy_revision}"
    return frozenset({"", revision_of(pool, klass), legacy})


def is_outdated(exporter: ExporterView, current: frozenset[str]) -> bool:
    return exporter.revision not in current


def fenced_by_rollout(exporter: ExporterView) -> bool:
    """Whether the pool fenced the instance for a rollout's removal (FENCED_FOR)."""
    return exporter.fenced and exporter.fence_reason[1].startswith(ROLLOUT_REMOVAL)
