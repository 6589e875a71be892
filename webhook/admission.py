"""One admission review in, one `Outcome` out: which checks and defaults apply to which
endpoint, kind and operation. No HTTP here (that is `webhook.app`), no envelope (that is
`webhook.envelope`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from api.imagepolicy import ImagePolicy
from webhook.checks_images import own_image_findings
from webhook.clusterview import ClusterUnavailable, ClusterView
from webhook.crossobject import (
    check_class_change,
    check_class_delete,
    check_set_against_class,
    check_set_delete,
    check_set_overlap,
)
from webhook.decode import AdmissionRequest
from webhook.defaulter import SchemaSource, default_object
from webhook.envelope import UNAVAILABLE, Outcome
from webhook.routes import Endpoint, Role
from webhook.validator import validate_object
from webhook.verdict import Verdict

__all__ = ["CROSS_OBJECT_SKIPPED", "Admission", "object_name"]

CROSS_OBJECT_SKIPPED = "cross-object checks skipped: the webhook has no cluster access"
_IMAGE_KINDS = ("ExporterSet", "VirtualTargetClass")  # the kinds with `spec.images`


def object_name(request: AdmissionRequest) -> str:
    """The name apiserver messages use: the request's, else the object's (or generateName)."""
    if request.name:
        return request.name
    metadata = (request.object or request.old_object or {}).get("metadata")
    if isinstance(metadata, Mapping):
        for key in ("name", "generateName"):
            if isinstance(metadata.get(key), str) and metadata[key]:
                return str(metadata[key])
    return ""


@dataclass(frozen=True)
class Admission:
    schema_source: SchemaSource
    view: ClusterView | None = None
    # kube-apiserver validates an object against its CRD's structural schema (types,
    # enums) before it calls validating webhooks; behind it, checking that again is work
    # done twice. Offline validation has no apiserver in front: it keeps it. The rule
    # table runs either way (`webhook.validator`): a CRD not ours may lack its CEL.
    schema_enforced_upstream: bool = False
    # The administrator's image allow-list; None: every well-formed image is admitted.
    image_policy: ImagePolicy | None = None

    async def review(self, endpoint: Endpoint, request: AdmissionRequest, budget: float) -> Outcome:
        served = endpoint.kind
        if (request.group, request.version, request.kind) != (
            served.group,
            served.version,
            served.kind,
        ):
            got = f"{request.kind}.{request.group}/{request.version}".replace("./", "/")
            return Outcome(
                code=400,
                reason="BadRequest",
                message=f"{endpoint.path} serves {served.qualified}/{served.version}, not {got}",
            )
        if request.operation == "CONNECT":
            return Outcome()
        if endpoint.role is Role.MUTATE:
            return self._mutate(request)
        return await self._validate(request, budget)

    def _mutate(self, request: AdmissionRequest) -> Outcome:
        if request.operation == "DELETE" or request.object is None:
            return Outcome()
        # The request's object was decoded for this review alone: default it in place.
        _, edits = default_object(request.kind, request.object, self.schema_source, in_place=True)
        return Outcome(edits=edits)

    async def _validate(self, request: AdmissionRequest, budget: float) -> Outcome:
        kind = request.kind
        if request.operation == "DELETE":
            if kind not in ("VirtualTargetClass", "ExporterSet"):
                return Outcome()
            if self.view is None:
                return Outcome(warnings=[CROSS_OBJECT_SKIPPED])
            if kind == "ExporterSet":
                namespace, name = request.namespace, request.name
                deleted = check_set_delete(request.old_object, namespace, name, self.view, budget)
                return await self._cross(deleted, Verdict())
            return await self._cross(
                check_class_delete(request.namespace, request.name, self.view, budget),
                Verdict(),
            )
        if request.object is None:
            return Outcome(
                code=400, reason="BadRequest", message=f"{request.operation} carries no object"
            )
        old = request.old_object if request.operation == "UPDATE" else None
        verdict = validate_object(
            kind,
            request.object,
            self.schema_source,
            old,
            check_schema=not self.schema_enforced_upstream,
        )
        if self.image_policy is not None and kind in _IMAGE_KINDS:
            verdict.extend(own_image_findings(self.image_policy, request.object, old))
        if kind not in ("ExporterSet", "VirtualTargetClass"):
            return Outcome(verdict.errors, verdict.warnings)
        if self.view is None:
            if kind == "VirtualTargetClass":
                return Outcome(verdict.errors, verdict.warnings)
            return Outcome(verdict.errors, [*verdict.warnings, CROSS_OBJECT_SKIPPED])
        if kind == "VirtualTargetClass":
            if verdict.errors:  # a class refused already is not rendered
                return Outcome(verdict.errors, verdict.warnings)
            changed = check_class_change(request.object, request.namespace, self.view, budget)
            return await self._cross(changed, verdict)
        return await self._cross(self._set_checks(request, old, budget), verdict)

    async def _set_checks(
        self, request: AdmissionRequest, old: Mapping[str, Any] | None, budget: float
    ) -> Verdict:
        assert request.object is not None and self.view is not None
        verdict = await check_set_against_class(
            request.object, request.namespace, self.view, budget, self.image_policy, old
        )
        verdict.extend(
            await check_set_overlap(request.object, request.namespace, self.view, budget)
        )
        return verdict

    async def _cross(self, check: Awaitable[Verdict], verdict: Verdict) -> Outcome:
        """Add a cross-object check's findings, or the reason it could not run.

        No timer is armed here: a `ClusterView` bounds its own waiting by the budget it is
        given (the watch cache on a miss, its only wait). A timer per review cost more than
        the whole check on a cache hit."""
        try:
            verdict.extend(await check)
        except ClusterUnavailable as exc:
            if verdict.errors:
                return Outcome(
                    verdict.errors, [*verdict.warnings, f"cross-object checks skipped: {exc}"]
                )
            return Outcome(
                warnings=verdict.warnings,
                code=UNAVAILABLE,
                reason="ServiceUnavailable",
                message=f"cannot check against the cluster ({exc}); retry the request",
            )
        return Outcome(verdict.errors, verdict.warnings)
