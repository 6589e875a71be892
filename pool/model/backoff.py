"""The backoff of a failing pool, as the pool remembers it.

A pool counts the failures of its instances in a row (`pool.rules.backoff` says
which instances failed). After the n-th failure in a row the next instance waits
`delay(n - 1)` from the moment the last failure ended: `BASE`, doubling up to `CAP`.

The pool remembers its backoff (`Backoff`, encoded into the BACKOFF annotation of the set
or of its memory Lease), so the count and the moment outlive the failed instances, a
restart and a change of leader. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from pool.model.memorycodec import count, decode_memory, encode_memory, moment, text
from pool.model.timefmt import format_duration, format_time

__all__ = ["BASE", "CAP", "Backoff", "decode", "delay", "encode"]

BASE = timedelta(seconds=5)
CAP = timedelta(minutes=5)


def delay(step: int) -> timedelta:
    """The wait after the (step + 1)-th failure in a row."""
    wait: timedelta = BASE * (2 ** min(step, 16))
    return min(wait, CAP)


@dataclass(frozen=True, slots=True)
class Backoff:
    """A failing pool's backoff: `failures` in a row, the moment the last one ended (whole
    seconds, as the API writes times), the instance that failed last and its last words,
    and the revision of spec and class they were rendered from."""

    failures: int
    at: datetime
    instance: str
    quote: str
    revision: str = ""

    @property
    def retry_at(self) -> datetime:
        return self.at + delay(self.failures - 1)

    @property
    def step_note(self) -> str:
        """The words of the message that name the step."""
        return f"failure {self.failures} in a row"

    def message(self) -> str:
        return (
            f"instances fail before serving; the last, {self.instance}, "
            f"{self.quote}; {self.step_note}, next instance after "
            f"{format_duration(delay(self.failures - 1))} (at {format_time(self.retry_at)})"
        )


def encode(backoff: Backoff) -> str:
    """The BACKOFF annotation's value."""
    return encode_memory(
        {
            "failures": backoff.failures,
            "lastFailure": format_time(backoff.at),
            "instance": backoff.instance,
            "message": backoff.quote,
            "revision": backoff.revision,
        }
    )


def _backoff(raw: Mapping[str, object]) -> Backoff:
    fields = (text(raw.get(key, "")) for key in ("instance", "message", "revision"))
    return Backoff(count(raw["failures"], least=1), moment(raw["lastFailure"]), *fields)


def decode(value: object) -> Backoff | None:
    """The backoff an annotation value holds; None when absent or unreadable."""
    return decode_memory(value, _backoff)
