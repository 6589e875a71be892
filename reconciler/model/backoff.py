"""The backoff of a failing pool, as the pool remembers it.

A pool counts the failures of its instances in a row (`reconciler.rules.backoff` says
which instances failed). After the n-th failure in a row the next instance waits
`delay(n - 1)` from the moment the last failure ended: `BASE`, doubling up to `CAP`.

The pool remembers its backoff (`Backoff`, encoded into the BACKOFF annotation of the set
or of its memory Lease), so the count and the moment outlive the failed instances, a
restart and a change of leader. Pure; no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.model.timefmt import format_duration, format_time, parse_time

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
    return json.dumps(
        {
            "failures": backoff.failures,
            "lastFailure": format_time(backoff.at),
            "instance": backoff.instance,
            "message": backoff.quote,
            "revision": backoff.revision,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def decode(text: object) -> Backoff | None:
    """The backoff an annotation value holds; None when absent or unreadable (a value
    someone edited into nonsense is forgotten, not fatal)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        raw = json.loads(text)
        failures, at = raw["failures"], parse_time(raw["lastFailure"])
        fields = [raw.get(k, "") for k in ("instance", "message", "revision")]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(failures, int) or failures < 1 or not all(isinstance(f, str) for f in fields):
        return None
    return Backoff(failures, at.replace(microsecond=0), *fields)
