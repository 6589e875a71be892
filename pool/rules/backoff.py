"""Instances that fail, told apart from instances that finished, and the pool's backoff.

An instance has failed when its Pod ended (or its exporter container exited) and either
the exporter never registered since that Pod was created (no Registered condition that
became True after the Pod's creation), or the exporter exited non-zero. Jumpstarter
0.9.0's `jmp run` exits 0 after five quick failures of its serving process, so a zero
exit is no proof of a clean end; registration is. A failed instance was not recycled: it
is replaced under the pool's backoff, not at once.

The backoff counts failures in a row: every Exporter carries the count the pool had when
it was created (BACKOFF_STEP, 0 for a healthy pool), so its failure is that count + 1.
After the n-th failure in a row the next instance waits (`pool.model.backoff`: 5 s
doubling up to 5 min) from the moment the last failure ended. Then one probe instance is
created, carrying n; nothing else is created while it boots.

The pool remembers its backoff (`pool.model.backoff.Backoff`), so the count and
the moment outlive the failed instances: the newest failed instance is kept (out of the
capacity) until its delay has passed, and failed instances leave only once the pool's
memory holds their failures. A probe is then created with the right count whether or not
the removal left room in the same pass (at the ceiling it does not), under a cache that
still shows a removed instance or no longer does, after a restart and after a change of
leader.

The backoff ends when an instance of the current revision registers after the last
failure (the pool then fills in one pass), or when the revision changes (a fix is tried
at once and in full). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pool.model.backoff import Backoff
from pool.model.views import ExporterView, PodView

__all__ = [
    "failed",
    "merge",
    "newest_failure",
    "registered_after",
    "step_of",
]

_QUOTE = 300  # characters of the exporter's last words kept in the status message


def registered_since(exporter: ExporterView, pod: PodView) -> bool:
    """The exporter registered while this Pod existed: it became Registered, or (once
    unregistered) last reported, after the Pod's creation (`ExporterView.registered_at`),
    or it is Registered with no time to compare, or it served a lease."""
    at = exporter.registered_at
    if at is not None and pod.created is not None:
        return at >= pod.created or (exporter.registered and bool(exporter.served_lease))
    return exporter.registered or bool(exporter.served_lease)


def failed(exporter: ExporterView, pod: PodView) -> bool:
    """The Pod ended before its exporter registered, or the exporter exited non-zero."""
    if not pod.done:
        return False
    return pod.exit_code not in (None, 0) or not registered_since(exporter, pod)


def step_of(exporter: ExporterView) -> int:
    """Failures in a row before the instance was created; 0 once it has registered."""
    return 0 if exporter.registered or exporter.served_lease else exporter.backoff_step


def registered_after(exporters: Iterable[ExporterView], revision: str) -> datetime | None:
    """When one of these instances of `revision` last registered (its Registered
    condition's last transition, else its creation), None when none has: failures that
    ended before that moment are healed, not counted."""
    moments = [
        (e.registered_at or e.created).replace(microsecond=0)
        for e in exporters
        if (e.registered or e.served_lease) and e.revision in ("", revision)
    ]
    return max(moments, default=None)


def _quote(pod: PodView) -> str:
    code = "exited" if pod.exit_code is None else f"exited with code {pod.exit_code}"
    text = " ".join(pod.message.split())
    if len(text) > _QUOTE:
        text = "..." + text[-_QUOTE:]
    return f"{code}: {text}" if text else f"{code} (no termination message)"


def _ended(exporter: ExporterView, pod: PodView) -> datetime:
    """When the failure ended: the exporter's end, else (no container status) the Pod's
    creation, else the Exporter's."""
    moment = pod.finished_at or pod.created or exporter.created
    return moment.replace(microsecond=0)


def newest_failure(
    failures: Iterable[tuple[ExporterView, PodView]], revision: str, since: datetime | None
) -> Backoff | None:
    """What the failed instances present say (each with its ended Pod), of those that
    ended after `since` (a registration): the most failures in a row any of them carries,
    and the one that ended last."""
    records = [(_ended(e, p), e.name, e, p) for e, p in failures]
    records = [r for r in records if since is None or r[0] >= since]
    if not records:
        return None
    at, name, _, pod = max(records, key=lambda r: (r[0], r[1]))
    count = max(step_of(e) + 1 for _, _, e, _ in records)
    return Backoff(count, at, name, _quote(pod), revision)


def merge(memory: Backoff | None, seen: Backoff | None) -> Backoff | None:
    """The backoff in force: what the pool remembers, with what its failed instances
    say. Never fewer failures nor an earlier moment than either."""
    if memory is None or seen is None:
        return memory or seen
    if seen.instance == memory.instance and seen.failures <= memory.failures:
        return memory  # that failure is remembered already
    later = seen if seen.at > memory.at else memory
    return Backoff(
        max(memory.failures, seen.failures),
        later.at,
        later.instance,
        later.quote,
        memory.revision,
    )
