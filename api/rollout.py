"""The ExporterSet's rollout annotation, spelled once for the webhook and the reconciler.

`virtualtarget.jumpstarter.dev/rollout: paused` holds the replacement of instances of an
earlier revision (new instances are still made at the current one); removing it resumes.
No other value means anything, so the webhook refuses any other, naming the one allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import ErrorType, FieldError

__all__ = ["ROLLOUT", "ROLLOUT_PAUSED", "rollout_errors"]

ROLLOUT = "virtualtarget.jumpstarter.dev/rollout"
ROLLOUT_PAUSED = "paused"


def rollout_errors(metadata: Any) -> list[FieldError]:
    """The annotation's value is `paused`, or it is absent."""
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping) or ROLLOUT not in annotations:
        return []
    value = annotations[ROLLOUT]
    if value == ROLLOUT_PAUSED:
        return []
    field = f"metadata.annotations[{ROLLOUT}]"
    detail = f'supported values: "{ROLLOUT_PAUSED}" (remove the annotation to resume)'
    return [FieldError(ErrorType.NOT_SUPPORTED, field, detail, value)]
