"""HTTP decoding and limits: from a request body to a checked `AdmissionRequest`.

A body larger than `MAX_BODY_BYTES` is refused with 413 before it is read whole; a
body that is not an `admission.k8s.io/v1` AdmissionReview is refused with 400. Everything
that passes is well-formed enough for the handlers to use without further checks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive

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
_NOT_GVK = "AdmissionReview.request.kind must be a GroupVersionKind object"


class DecodeError(Exception):
    """The body is not a usable AdmissionReview; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# Not frozen: a frozen dataclass pays an object.__setattr__ per field on every review.
@dataclass(slots=True)
class AdmissionRequest:
    uid: str
    group: str
    version: str
    kind: str
    operation: str
    namespace: str
    name: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool


async def read_body(receive: Receive, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The whole body, read straight from the ASGI channel (`headers` as in the ASGI
    scope), or DecodeError(413) as soon as it exceeds the limit."""
    for name, value in headers:
        if name == b"content-length":
            if value.isdigit() and int(value) > MAX_BODY_BYTES:
                raise DecodeError(413, f"request body exceeds {MAX_BODY_BYTES} bytes")
            break
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away mid-body
            raise DecodeError(400, "the request body ended early")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise DecodeError(413, f"request body exceeds {MAX_BODY_BYTES} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def decode_review(body: bytes) -> AdmissionRequest:
    """Parse and check an AdmissionReview; DecodeError(400) naming what is wrong."""
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(400, f"body is not valid JSON: {_first_line(exc)}") from None
    # JSON objects decode to dict: `dict` checks here, not the slower `Mapping` ABC.
    if not isinstance(review, dict):
        raise DecodeError(400, "body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise DecodeError(400, f"body must be an AdmissionReview of apiVersion {API_VERSION}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise DecodeError(400, "AdmissionReview.request must be an object")
    uid = request.get("uid")
    if not uid or not isinstance(uid, str):
        raise DecodeError(400, "AdmissionReview.request.uid must be a non-empty string")
    kind = request.get("kind")
    if not isinstance(kind, dict):
        raise DecodeError(400, _NOT_GVK)
    group, version, kind_name = kind.get("group", ""), kind.get("version", ""), kind.get("kind", "")
    if not (isinstance(group, str) and isinstance(version, str) and isinstance(kind_name, str)):
        raise DecodeError(400, _NOT_GVK)
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise DecodeError(
            400, f"AdmissionReview.request.operation must be one of {', '.join(OPERATIONS)}"
        )
    new, old = request.get("object"), request.get("oldObject")
    for field, value in (("object", new), ("oldObject", old)):
        if value is not None and not isinstance(value, dict):
            raise DecodeError(400, f"AdmissionReview.request.{field} must be an object or null")
    namespace, name = request.get("namespace", ""), request.get("name", "")
    dry_run = request.get("dryRun", False)
    if not isinstance(namespace, str) or not isinstance(name, str) or not isinstance(dry_run, bool):
        raise DecodeError(
            400, "AdmissionReview.request namespace and name must be strings, dryRun a boolean"
        )
    return AdmissionRequest(
        uid, group, version, kind_name, operation, namespace, name, new, old, dry_run
    )


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
