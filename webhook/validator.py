"""Single-object validation of one kind: schema types, the shared rule table, the
webhook-only checks and, on UPDATE, immutability. Create and update share this one
function; every error is collected, none stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from api.fielderrors import FieldError
from webhook.checks_class import check_class
from webhook.checks_exporterset import check_exporterset
from webhook.defaulter import SchemaSource
from webhook.immutability import immutability_errors
from webhook.rules_runner import run_rules
from webhook.schema_check import schema_errors
from webhook.verdict import Verdict

__all__ = ["validate_object"]

log = logging.getLogger(__name__)

# Each kind's checks, given the object and, on an update, the one stored.
_KIND_CHECKS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None], Verdict]] = {
    "ExporterSet": check_exporterset,
    "VirtualTargetClass": lambda obj, _: check_class(obj),
}


def validate_object(
    kind: str,
    obj: Mapping[str, Any],
    schema_source: SchemaSource,
    old: Mapping[str, Any] | None = None,
    *,
    check_schema: bool = True,
) -> Verdict:
    """Every single-object error and warning of `obj` (and of the change from `old`);
    `check_schema=False` when the CRD's structural schema is already known to hold."""
    verdict = Verdict()
    if check_schema:
        verdict.errors += schema_errors(obj, schema_source(kind))
    # The rule table runs behind kube-apiserver too: where the installed CRD is not this
    # product's (Jumpstarter's carries only a few of these rules as CEL), nothing else
    # checks them; on ours CEL refused a breach already, so this finds none (about 35 us
    # a set). A wrong type was reported above; a check that trips over it adds nothing.
    verdict.errors += _guarded(lambda: run_rules(kind, obj), kind, "rules")
    checks = _KIND_CHECKS.get(kind)
    if checks is not None:
        try:
            verdict.extend(checks(obj, old))
        except (TypeError, AttributeError, KeyError, ValueError):
            log.debug("%s checks skipped on a malformed object", kind, exc_info=True)
    if old is not None:
        verdict.errors += immutability_errors(kind, obj, old)
    return _deduplicated(verdict)


def _guarded(run: Callable[[], list[FieldError]], kind: str, what: str) -> list[FieldError]:
    try:
        return run()
    except (TypeError, AttributeError, KeyError, ValueError):
        log.debug("%s %s skipped on a malformed object", kind, what, exc_info=True)
        return []


def _deduplicated(verdict: Verdict) -> Verdict:
    if len(verdict.errors) < 2 and len(verdict.warnings) < 2:
        return verdict
    # FieldError values may be unhashable (maps, lists): compare their text.
    unique: dict[str, FieldError] = {}
    for error in verdict.errors:
        unique.setdefault(str(error), error)
    return Verdict(list(unique.values()), list(dict.fromkeys(verdict.warnings)))
