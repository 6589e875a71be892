"""ExporterSet checks that neither the CRD schema nor its CEL rules express: selector
syntax and matchExpressions, label syntax, image references, the cooldown's range and the
warm-buffer annotations (`api.warmbuffer`).

Single-object only; the class lookups live in `webhook.crossobject`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.duration import parse_go_duration_ns
from api.fielderrors import FieldError
from api.labels import labels_errors, selector_errors, selector_matches
from api.rollout import rollout_errors
from api.warmbuffer import annotation_errors
from webhook.checks_common import child, images_errors
from webhook.verdict import Verdict

__all__ = ["UNBOUNDED", "check_exporterset"]


def check_exporterset(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Verdict:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return Verdict([FieldError.required("spec")])
    verdict = Verdict()
    verdict.errors += _selector_errors(spec)
    verdict.errors += images_errors(spec.get("images"), "spec.images")
    verdict.errors += _cooldown_range_errors(spec.get("scaleDownCooldown"))
    annotations = child(obj, "metadata", "annotations")
    if isinstance(annotations, dict):
        verdict.errors += annotation_errors(annotations, _stored_annotations(old))
    verdict.errors += rollout_errors(obj.get("metadata"))
    if spec.get("maxReplicas") == 0:
        verdict.warnings.append(UNBOUNDED)
    return verdict


# There is no ceiling of zero: a pool admitted can always serve a Lease (docs/concepts.md).
UNBOUNDED = "spec.maxReplicas: 0 means no ceiling: the pool may grow without bound"


def _stored_annotations(old: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """On an update, the annotations stored (none: {}); None on a create."""
    if old is None:
        return None
    held = child(old, "metadata", "annotations")
    return held if isinstance(held, dict) else {}


def _selector_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    selector = spec.get("selector")
    if not isinstance(selector, dict):  # absent or of another type: the schema's to report
        return []
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [
            FieldError.invalid(
                "spec.selector", dict(selector), "empty selector is invalid for an ExporterSet"
            )
        ]
    errors = selector_errors(selector, "spec.selector")
    labels = child(spec, "template", "metadata", "labels")
    if labels is not None:
        errors += labels_errors(labels, "spec.template.metadata.labels")
    if errors or not isinstance(labels, dict):
        return errors
    expressions = selector.get("matchExpressions")
    if not expressions:  # the rule table reports a matchLabels mismatch
        return errors
    wanted = selector.get("matchLabels") or {}
    if all(labels.get(k) == v for k, v in wanted.items()) and not selector_matches(
        selector, labels
    ):
        errors.append(
            FieldError.invalid(
                "spec.template.metadata.labels",
                dict(labels),
                "must match spec.selector.matchExpressions; a pool whose selector misses its "
                "template never sees its own instances",
            )
        )
    return errors


def _cooldown_range_errors(value: Any) -> list[FieldError]:
    # The rule table checks the syntax; only an overflowing duration is left for here.
    if not isinstance(value, str):
        return []
    try:
        parse_go_duration_ns(value)
    except ValueError as exc:
        if "out of range" in str(exc):
            return [FieldError.invalid("spec.scaleDownCooldown", value, "duration out of range")]
    return []
