"""HTTP decoding and limits: from a request body to a checked `AdmissionRequest`.

A body larger than `MAX_BODY_BYTES` is refused with 413 before it is read whole; a
body that is not an `admission.k8s.io/v1` AdmissionReview is refused with 400. Everything
that passes is well-formed enough for the handlers to use without further checks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "API_VERSION",
    "MAX_BODY_BYTES",
    "OPERATIONS",
    "AdmissionRequest",
    "DecodeError",
    "decode_review",
    "read_body",
]

API_VERSION = "admission.k8s.io/v1"
# kube-apiserver caps request bodies at 3 MiB; a review carries object and oldObject.
MAX_BODY_BYTES = 3 * 1024 * 1024
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class DecodeError(Exception):
    """The body is not a usable AdmissionReview; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    group: str
    version: str
    kind: str
    operation: str
    namespace: str
    name: str
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None
    dry_run: bool


async def read_body(chunks: AsyncIterator[bytes], content_length: str | None) -> bytes:
    """The whole body, or DecodeError(413) as soon as it exceeds the limit."""
    if (
        content_length is not None
        and content_length.isdigit()
        and int(content_length) > MAX_BODY_BYTES
    ):
        raise DecodeError(413, f"request body exceeds {MAX_BODY_BYTES} bytes")
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise DecodeError(413, f"request body exceeds {MAX_BODY_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


def decode_review(body: bytes) -> AdmissionRequest:
    """Parse and check an AdmissionReview; DecodeError(400) naming what is wrong."""
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(400, f"body is not valid JSON: {_first_line(exc)}") from None
    if not isinstance(review, dict):
        raise DecodeError(400, "body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise DecodeError(400, f"body must be an AdmissionReview of apiVersion {API_VERSION}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise DecodeError(400, "AdmissionReview.request must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise DecodeError(400, "AdmissionReview.request.uid must be a non-empty string")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not all(
        isinstance(kind.get(k, ""), str) for k in ("group", "version", "kind")
    ):
        raise DecodeError(400, "AdmissionReview.request.kind must be a GroupVersionKind object")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise DecodeError(
            400, f"AdmissionReview.request.operation must be one of {', '.join(OPERATIONS)}"
        )
    objects = {field: request.get(field) for field in ("object", "oldObject")}
    for field, value in objects.items():
        if value is not None and not isinstance(value, dict):
            raise DecodeError(400, f"AdmissionReview.request.{field} must be an object or null")
    namespace, name, dry_run = (
        request.get("namespace", ""),
        request.get("name", ""),
        request.get("dryRun", False),
    )
    if not isinstance(namespace, str) or not isinstance(name, str) or not isinstance(dry_run, bool):
        raise DecodeError(
            400, "AdmissionReview.request namespace and name must be strings, dryRun a boolean"
        )
    return AdmissionRequest(
        uid=uid,
        group=kind.get("group", ""),
        version=kind.get("version", ""),
        kind=kind.get("kind", ""),
        operation=operation,
        namespace=namespace,
        name=name,
        object=objects["object"],
        old_object=objects["oldObject"],
        dry_run=dry_run,
    )


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
