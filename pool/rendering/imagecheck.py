"""The set's `ImagesAllowed` condition: are the images its instances would run (set over
class over the provisioner's default) on the administrator's image allow-list?

The list and its rule are `api.imagepolicy`'s, the webhook's too. The list can change
under a running pool (a new flag, a rollout): a pool whose image it now refuses is not
torn down. Its instances stay and keep being kept; the planner only creates no new
instance and no new Pod while this condition is False (`Observation.images`). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.imagepolicy import ALLOW_LIST, ImagePolicy, effective_images
from pool.model.status import ConditionSpec
from pool.rendering.render import Image

__all__ = ["IMAGES_ALLOWED", "IMAGE_NOT_ALLOWED", "images_condition"]

IMAGES_ALLOWED = "ImagesAllowed"  # the condition type, and its reason when True
IMAGE_NOT_ALLOWED = "ImageNotAllowed"


def images_condition(
    policy: ImagePolicy,
    exporter_set: Mapping[str, Any],
    klass: Mapping[str, Any] | None,
    defaults: Mapping[str, Image],
) -> ConditionSpec:
    meta = (klass or {}).get("metadata") or {}
    refused = []
    chosen_images = effective_images(
        exporter_set.get("spec"),
        (klass or {}).get("spec"),
        {role: image.image for role, image in defaults.items()},
    )
    for chosen in chosen_images:
        refusal = policy.refusal(chosen.reference)
        if refusal is None:
            continue
        named_by = f'VirtualTargetClass "{meta.get("name", "")}"'
        where = named_by if chosen.source == "VirtualTargetClass" else "the set"
        refused.append(
            f'spec.images.{chosen.role}.image "{chosen.reference}" of {where}: {refusal}'
        )
    if not refused:
        return ConditionSpec(
            IMAGES_ALLOWED, True, IMAGES_ALLOWED, f"every image is on {ALLOW_LIST}"
        )
    return ConditionSpec(
        IMAGES_ALLOWED,
        False,
        IMAGE_NOT_ALLOWED,
        "; ".join(refused) + "; running instances stay, no new instance is created from it",
    )
