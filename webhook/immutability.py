"""Fields that may not change on UPDATE.

Changing an ExporterSet's selector would orphan its instances, changing its class would
leave them rendered for another backend, and changing a class's provisioner would hand
running instances to a different controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError
from webhook.checks_common import child

__all__ = ["IMMUTABLE", "immutability_errors"]

IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "ExporterSet": (("spec", "selector"), ("spec", "virtualTargetClassName")),
    "VirtualTargetClass": (("spec", "provisioner"),),
}

_ABSENT = object()


def immutability_errors(
    kind: str, new: Mapping[str, Any], old: Mapping[str, Any]
) -> list[FieldError]:
    errors: list[FieldError] = []
    for path in IMMUTABLE.get(kind, ()):
        before, after = _get(old, path), _get(new, path)
        if before is not _ABSENT and before != after:
            shown = None if after is _ABSENT else after
            errors.append(FieldError.invalid(".".join(path), shown, "field is immutable"))
    return errors


def _get(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    parent = child(obj, *path[:-1])
    if not isinstance(parent, dict) or path[-1] not in parent:
        return _ABSENT
    return parent[path[-1]]
