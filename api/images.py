"""Container image references and pull policies, checked as the kubelet would read them.

A malformed `images.*.image` only shows up later as an ErrImagePull on every instance
of a pool; the webhook refuses it at admission instead. No I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["PULL_POLICIES", "image_reference_errors"]

PULL_POLICIES = ("Always", "Never", "IfNotPresent")

# distribution/reference grammar: [domain[:port]/]path[:tag][@digest]
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_LABEL}(?:\.{_DOMAIN_LABEL})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$"
)
_NAME_MAX = 255


@lru_cache(maxsize=4096)  # names and labels repeat across reviews
def image_reference_errors(reference: str) -> tuple[str, ...]:
    """Why `reference` is not a valid image reference; empty when it is one."""
    if not reference:
        return ("must not be empty",)
    if reference != reference.strip():
        return ("must not contain leading or trailing whitespace",)
    if not _REFERENCE.fullmatch(reference):
        return (
            "must be an image reference such as quay.io/org/repo:tag or "
            "registry.example.com:5000/repo@sha256:<digest> (lowercase repository path)",
        )
    name = reference.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    if len(name) > _NAME_MAX:
        return ("repository name must be no more than 255 characters",)
    return ()
