"""The AdmissionReview response, built in one place.

Handlers return an `Outcome`; this module completes it into the envelope kube-apiserver
expects: the request's uid, `status` with code, reason, a message naming every failing
field and its causes, the base64 JSON Patch, and warnings cut to 120 characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api.fielderrors import FieldError
from webhook.decode import API_VERSION
from webhook.patch import Edit, encode_patch

__all__ = [
    "INTERNAL_ERROR",
    "MAX_WARNING_CHARS",
    "SERVER_ERROR_CODES",
    "UNAVAILABLE",
    "Outcome",
    "deny_message",
    "error_body",
    "review_response",
]

MAX_WARNING_CHARS = 120
# The codes of a review the webhook could not decide: a failed check, or a cluster that
# did not answer in time. The metrics count each from zero (webhook.metrics).
INTERNAL_ERROR = 500
UNAVAILABLE = 503
SERVER_ERROR_CODES = (INTERNAL_ERROR, UNAVAILABLE)


@dataclass(slots=True)
class Outcome:
    """What admission decided. `code`/`reason` describe a denial; `message` overrides
    the field-error message (for denials that are not about a field)."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    code: int = 422
    reason: str = "Invalid"
    message: str = ""

    @property
    def allowed(self) -> bool:
        return not self.errors and not self.message


def deny_message(qualified_kind: str, name: str, errors: list[FieldError]) -> str:
    """`ExporterSet.virtualtarget.jumpstarter.dev "pool-a" is invalid: [a, b]`, as apiserver
    prints an Invalid status (brackets only when there is more than one error)."""
    texts = [str(error) for error in errors]
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    return f'{qualified_kind} "{name}" is invalid: {joined}'


def _warning(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_WARNING_CHARS else text[: MAX_WARNING_CHARS - 3] + "..."


def review_response(uid: str, outcome: Outcome, qualified_kind: str, name: str) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": outcome.allowed}
    if not outcome.allowed:
        response["status"] = {
            "status": "Failure",
            "code": outcome.code,
            "reason": outcome.reason,
            "message": outcome.message or deny_message(qualified_kind, name, outcome.errors),
            "details": {
                "name": name,
                "kind": qualified_kind.split(".", 1)[0],
                "group": qualified_kind.partition(".")[2],
                "causes": [
                    {"field": e.field, "reason": e.type.reason, "message": _body(e)}
                    for e in outcome.errors
                ],
            },
        }
    else:
        patch = encode_patch(outcome.edits)
        if patch is not None:
            response["patchType"] = "JSONPatch"
            response["patch"] = patch
    if outcome.warnings:
        response["warnings"] = [_warning(w) for w in dict.fromkeys(outcome.warnings)]
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def error_body(message: str) -> dict[str, Any]:
    """The JSON body of a 400/413 answer to something that is not a usable review."""
    return {"error": message}


def _body(error: FieldError) -> str:
    """A StatusCause message: the error without its leading field path."""
    return str(error).removeprefix(f"{error.field}: ")
