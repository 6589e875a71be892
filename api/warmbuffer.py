"""The annotations of an ExporterSet that size its warm buffer from demand, read once here
for both the webhook (which denies a bad value, naming it) and the reconciler (which reads
a bad value as absent: the pool then keeps the buffer `minAvailableReplicas` says). No I/O.

- `virtualtarget.jumpstarter.dev/warm-buffer: auto` opts the pool in: the buffer is sized
  from the pool's lease arrivals and boot times (`pool.rules.demand`), never below
  `minAvailableReplicas`. Absent: the pool behaves as without this feature.
- `virtualtarget.jumpstarter.dev/target-lease-wait`: how long a lease may wait for an
  instance (a duration such as `30s`; default `0s`: a lease should find a warm instance).
- `virtualtarget.jumpstarter.dev/boot-estimate`: how long an instance of the pool takes
  from creation to ready until the pool has seen some boot (default `3m`, a QEMU guest's).
  Every pool uses it, auto or not: a scheduled Lease counts from its begin minus the boot time.
- `virtualtarget.jumpstarter.dev/demand-window`: how fast the learned arrival rate forgets
  (the time constant of its decay, default `10m`: a burst shows within minutes, a quiet
  night is forgotten).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from api.duration import parse_go_duration
from api.fielderrors import FieldError

__all__ = [
    "AUTO",
    "BOOT_ESTIMATE",
    "DEFAULT_BOOT_ESTIMATE",
    "DEFAULT_DEMAND_WINDOW",
    "DEMAND_WINDOW",
    "TARGET_LEASE_WAIT",
    "WARM_BUFFER",
    "WarmBufferSettings",
    "annotation_errors",
    "settings_of",
]

_GROUP = "virtualtarget.jumpstarter.dev"
WARM_BUFFER = f"{_GROUP}/warm-buffer"
TARGET_LEASE_WAIT = f"{_GROUP}/target-lease-wait"
BOOT_ESTIMATE = f"{_GROUP}/boot-estimate"
DEMAND_WINDOW = f"{_GROUP}/demand-window"
AUTO = "auto"
DEFAULT_BOOT_ESTIMATE = timedelta(minutes=3)
DEFAULT_DEMAND_WINDOW = timedelta(minutes=10)
# key, default, whether it must be above zero
_DURATIONS = (
    (TARGET_LEASE_WAIT, timedelta(0), False),
    (BOOT_ESTIMATE, DEFAULT_BOOT_ESTIMATE, True),
    (DEMAND_WINDOW, DEFAULT_DEMAND_WINDOW, True),
)


@dataclass(frozen=True, slots=True)
class WarmBufferSettings:
    auto: bool = False
    target_wait: timedelta = timedelta(0)
    boot_estimate: timedelta = DEFAULT_BOOT_ESTIMATE
    demand_window: timedelta = DEFAULT_DEMAND_WINDOW


def _duration(value: object, positive: bool) -> timedelta:
    """A Go duration, not negative (and above zero if `positive`); ValueError says why."""
    if not isinstance(value, str):
        raise ValueError("must be a duration string such as 30s")
    parsed = parse_go_duration(value)
    if parsed < timedelta(0) or (positive and parsed == timedelta(0)):
        raise ValueError("must be greater than 0" if positive else "must not be negative")
    return parsed


def _checks(annotations: Mapping[str, Any]) -> list[tuple[str, object, str]]:
    """(key, value, problem) for every annotation of this module that is set wrong."""
    problems: list[tuple[str, object, str]] = []
    mode = annotations.get(WARM_BUFFER)
    if mode is not None and mode != AUTO:
        problems.append((WARM_BUFFER, mode, f'must be "{AUTO}" (or absent: minAvailableReplicas)'))
    for key, _, positive in _DURATIONS:
        if key in annotations:
            try:
                _duration(annotations[key], positive)
            except ValueError as exc:
                problems.append((key, annotations[key], str(exc)))
    return problems


def annotation_errors(
    annotations: Mapping[str, Any], before: Mapping[str, Any] | None = None
) -> list[FieldError]:
    """One field error per annotation set wrong; on an update (`before`: the annotations
    stored), only those it changes: a value stored before the webhook checked it does not
    block the pool's own memory writes, nor any other edit of the set."""
    return [
        FieldError.invalid(f"metadata.annotations[{key}]", value, problem)
        for key, value, problem in _checks(annotations)
        if before is None or before.get(key) != value
    ]


def settings_of(annotations: Mapping[str, Any]) -> WarmBufferSettings:
    """The pool's settings; a value set wrong reads as its default (the webhook denies it)."""
    wrong = {key for key, _, _ in _checks(annotations)}
    durations = [
        _duration(annotations[key], positive)
        if key in annotations and key not in wrong
        else default
        for key, default, positive in _DURATIONS
    ]
    return WarmBufferSettings(annotations.get(WARM_BUFFER) == AUTO, *durations)
