"""Checks shared by VirtualTargetClass and ExporterSet: container images and resources.

Written defensively: the mutating endpoint and the offline validator see objects the
apiserver has not type-checked, so a node of the wrong type is skipped here (the schema
check reports it). Objects are decoded JSON or YAML, so an object node is a `dict`: the
checks test for `dict`, which costs a tenth of an `isinstance` against the `Mapping` ABC.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from api.fielderrors import FieldError, join_path
from api.images import image_reference_errors
from api.quantity import parse_quantity

__all__ = ["child", "images_errors", "resources_errors"]


def child(node: Any, *names: str) -> Any:
    """`node[names[0]][names[1]]…`, or None when a step is missing or not an object."""
    for name in names:
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node


def images_errors(images: Any, path: str) -> list[FieldError]:
    """Each `images.<role>.image` must be a well-formed image reference."""
    if not isinstance(images, dict):
        return []
    errors: list[FieldError] = []
    for role, image in images.items():
        reference = child(image, "image")
        if isinstance(reference, str):
            reasons = image_reference_errors(reference)
            errors += [FieldError.invalid(_image_field(path, role), reference, r) for r in reasons]
        elif isinstance(image, dict) and "image" not in image:
            errors.append(
                FieldError.required(
                    _image_field(path, role), "an image override must name its image"
                )
            )
    return errors


def _image_field(path: str, role: Any) -> str:
    return join_path(join_path(path, str(role)), "image")


def resources_errors(resources: Any, path: str) -> list[FieldError]:
    """Quantities parse, are not negative, and requests do not exceed limits."""
    if not isinstance(resources, dict):
        return []
    parsed: dict[str, dict[str, Decimal]] = {}
    errors: list[FieldError] = []
    for section in ("limits", "requests"):
        entries = resources.get(section)
        if not isinstance(entries, dict):
            continue
        parsed[section] = {}
        for name, value in entries.items():
            field = join_path(join_path(path, section), str(name))
            try:
                amount = parse_quantity(value)
            except ValueError as exc:
                errors.append(FieldError.invalid(field, value, str(exc)))
                continue
            if amount < 0:
                errors.append(
                    FieldError.invalid(field, value, "must be greater than or equal to 0")
                )
                continue
            parsed[section][str(name)] = amount
    limits = parsed.get("limits", {})
    for name, amount in parsed.get("requests", {}).items():
        if name in limits and amount > limits[name]:
            errors.append(
                FieldError.invalid(
                    join_path(join_path(path, "requests"), name),
                    resources["requests"][name],
                    f"must be less than or equal to {name} limit of {resources['limits'][name]}",
                )
            )
    return errors
