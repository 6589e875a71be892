"""The administrator's image allow-list at admission (`api.imagepolicy` has the rule).

Each image a class or set names is checked (`own_image_findings`), and a set's images
after the merge over its class (`inherited_image_findings`: the roles the set leaves to
its class). A refused image is denied at its field, with the image and the allowed
prefixes. On UPDATE an image that was already there is admitted with a warning instead
(the list may have been turned on under a running pool: the reconciler's own writes to
the set, a scale or a label change must still go through); the set's `ImagesAllowed`
condition says no new instance is created from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError, join_path
from api.imagepolicy import ALLOW_LIST, ImagePolicy, effective_images
from webhook.checks_common import child
from webhook.verdict import Verdict

__all__ = ["image_field", "inherited_image_findings", "own_image_findings"]

IMAGES = "spec.images"


def image_field(role: str) -> str:
    return join_path(join_path(IMAGES, role), "image")


def _kept(field: str) -> str:
    return f"{field} is not on {ALLOW_LIST}; admitted as unchanged, no new instance uses it"


def _named_images(obj: Mapping[str, Any] | None) -> dict[str, str]:
    images = child(obj, "spec", "images")
    if not isinstance(images, dict):
        return {}
    named = {str(role): child(node, "image") for role, node in images.items()}
    return {role: image for role, image in named.items() if isinstance(image, str) and image}


def own_image_findings(
    policy: ImagePolicy, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> Verdict:
    """The images the object itself names (`spec.images.<role>.image`)."""
    verdict = Verdict()
    named = _named_images(obj)
    before = _named_images(old) if named and old is not None else {}
    for role, image in named.items():
        refusal = policy.refusal(image)
        if refusal is None:
            continue
        field = image_field(role)
        if before.get(role) == image:
            verdict.warnings.append(_kept(field))
        else:
            verdict.errors.append(FieldError.invalid(field, image, refusal))
    return verdict


def inherited_image_findings(
    policy: ImagePolicy,
    exporter_set: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    class_name: str,
    klass: Mapping[str, Any],
    defaults: Mapping[str, str],
) -> Verdict:
    """The images a set runs because it leaves them to its class. On UPDATE refused only
    when the set has just dropped its own image for that role."""
    verdict = Verdict()
    if not _named_images(klass):  # the class lends no image of its own (the usual case)
        return verdict
    overridden_before = _named_images(old)
    for chosen in effective_images(exporter_set.get("spec"), klass.get("spec"), defaults):
        if chosen.source != "VirtualTargetClass":
            continue
        refusal = policy.refusal(chosen.reference)
        if refusal is None:
            continue
        field = image_field(chosen.role)
        if old is not None and chosen.role not in overridden_before:
            verdict.warnings.append(_kept(field))
            continue
        verdict.errors.append(
            FieldError.invalid(
                field,
                chosen.reference,
                f'the image VirtualTargetClass "{class_name}" names, which this set does not '
                f"override: {refusal}",
            )
        )
    return verdict
