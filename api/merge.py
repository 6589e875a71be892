"""The parameter deep merge: ExporterSet `parameters` over VirtualTargetClass `parameters`.

Maps merge key by key, recursively; scalars and lists from the override win whole.
The webhook checks the merged result and the reconciler renders from it, so both call
this one function. No I/O; inputs are never modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["deep_merge"]


def deep_merge(
    base: Mapping[str, Any] | None, override: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A new dict: `override` deep-merged over `base`."""
    merged: dict[str, Any] = dict(base or {})
    for key, value in (override or {}).items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged
