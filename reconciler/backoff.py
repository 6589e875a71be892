"""Instances that fail, told apart from instances that finished, and the pool's backoff.

An instance has failed when its Pod ended (or its exporter container exited) and either
the exporter never registered since that Pod was created (no Registered condition that
became True after the Pod's creation), or the exporter exited non-zero. Jumpstarter
0.9.0's `jmp run` exits 0 after five quick failures of its serving process, so a zero
exit is no proof of a clean end; registration is. A failed instance was not recycled: it
is replaced under the pool's backoff, not at once.

The backoff is read from the objects, so a restart finds it: every Exporter carries the
number of failures in a row the pool had when it was created (BACKOFF_STEP, 0 for a
healthy pool), and the newest failed instance is kept (not serving, out of the capacity)
until its delay has passed: `delay(step)` after its exporter ended, doubling from
`BASE` up to `CAP`. Then it goes and one probe instance takes its place, with step + 1.
While a probe boots nothing else is created; the first instance that registers ends the
backoff (the next ones are created with step 0), so a repaired pool fills in one step.
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.observe import ExporterView, PodView
from reconciler.timefmt import format_duration, format_time

__all__ = ["BASE", "CAP", "Backoff", "delay", "failed", "pool_backoff"]

BASE = timedelta(seconds=5)
CAP = timedelta(minutes=5)
_QUOTE = 300  # characters of the exporter's last words kept in the status message


def delay(step: int) -> timedelta:
    """The wait after the (step + 1)-th failure in a row."""
    wait: timedelta = BASE * (2 ** min(step, 16))
    return min(wait, CAP)


def registered_since(exporter: ExporterView, pod: PodView) -> bool:
    """The exporter registered while this Pod existed: its Registered condition changed
    after the Pod's creation (to True, or back to False as an exporter that unregisters
    on exit leaves it), or it is True with no time to compare, or it served a lease."""
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


@dataclass(frozen=True, slots=True)
class Backoff:
    """The newest failure of the pool: the instance kept as its record, and when the
    next instance may be tried."""

    record: str
    step: int  # failures in a row before the record was created
    ended: datetime
    quote: str

    @property
    def retry_at(self) -> datetime:
        return self.ended + delay(self.step)

    @property
    def next_step(self) -> int:
        return self.step + 1

    @property
    def step_note(self) -> str:
        """The words of the message that name the step: its Event is written once."""
        return f"failure {self.next_step} in a row"

    def message(self) -> str:
        return (
            f"instances fail before serving; the last, {self.record}, "
            f"{self.quote}; {self.step_note}, next instance after "
            f"{format_duration(delay(self.step))} (at {format_time(self.retry_at)})"
        )


def _quote(pod: PodView) -> str:
    code = "exited" if pod.exit_code is None else f"exited with code {pod.exit_code}"
    text = " ".join(pod.message.split())
    if len(text) > _QUOTE:
        text = "..." + text[-_QUOTE:]
    return f"{code}: {text}" if text else f"{code} (no termination message)"


def pool_backoff(
    failures: Iterable[tuple[ExporterView, PodView]],
) -> Backoff | None:
    """The backoff in force from the failed instances (each with its ended Pod)."""
    records = list(failures)
    if not records:
        return None

    def ended(item: tuple[ExporterView, PodView]) -> tuple[datetime, str]:
        exporter, pod = item
        return (pod.finished_at or pod.created or exporter.created, exporter.name)

    exporter, pod = max(records, key=ended)
    return Backoff(exporter.name, step_of(exporter), ended((exporter, pod))[0], _quote(pod))
