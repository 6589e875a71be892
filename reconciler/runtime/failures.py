"""A failed step of a pass, in the terms the set's status reports it.

A step fails for good when rendering an instance's objects raises (`RenderFailed`) or the
apiserver refuses a write with a 4xx answer (`WriteRejected`: 400, 403, 413, 422, ...),
or a provisioner's target cluster is not reached or refuses (`TargetFailed`:
`reconciler.runtime.targets`):
trying again unchanged meets the same refusal, so the set's Degraded condition says it,
with the step, its instance and the apiserver's message, trimmed. What may pass by
itself is not reported there, only retried: 404 and 409 (the plan met a world that moved
on; the next pass plans again), 429 and 5xx, timeouts and lost connections.
"""

from __future__ import annotations

import re

from pool.model.reasons import RENDER_FAILED, TARGET_FAILED, WRITE_REJECTED
from pool.model.views import StepFailure
from reconciler.runtime.kube import ApiError
from reconciler.runtime.targets import TargetError

__all__ = ["MESSAGE_LIMIT", "RenderError", "StepFailed", "classify", "trimmed"]

MESSAGE_LIMIT = 400  # characters of the error kept in the condition's message
_TRANSIENT = frozenset({404, 409, 429})


class RenderError(Exception):
    """Rendering an instance's objects raised `__cause__`."""


class StepFailed(Exception):
    """A step failed for good; `failure` says how, in the status's terms."""

    def __init__(self, failure: StepFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


def trimmed(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """One line of at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(step: str, exc: BaseException, generated: str = "") -> StepFailure | None:
    """The failure to report for `exc` raised by `step` (its words: "create pod pool-x"),
    None when it is retried without a word in the status. `generated` is the
    generateName of a create: the name the apiserver made up for the attempt is replaced by
    `<prefix>*` so that each retry reads the same."""
    if isinstance(exc, TargetError):  # the message names the Secret or object, and why
        return StepFailure(TARGET_FAILED, step, trimmed(str(exc)))
    if isinstance(exc, RenderError):
        cause = exc.__cause__ or exc
        return StepFailure(RENDER_FAILED, step, trimmed(f"{type(cause).__name__}: {cause}"))
    if isinstance(exc, ApiError) and 400 <= exc.status < 500 and exc.status not in _TRANSIENT:
        text = str(exc)
        if generated:
            text = re.sub(rf"{re.escape(generated)}[a-z0-9]{{5}}\b", f"{generated}*", text)
        return StepFailure(WRITE_REJECTED, step, trimmed(text))
    return None
