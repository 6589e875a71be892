"""Who may read `/metrics`: the caller's bearer token is reviewed by the apiserver, as
controller-runtime's secure metrics (its `filters.WithAuthenticationAndAuthorization`) do.

1. No `Authorization: Bearer` header, or a token the apiserver does not authenticate
   (a TokenReview): 401.
2. A SubjectAccessReview for that user, its groups and extra, non-resource path
   `/metrics`, verb `get`, that the apiserver does not allow: 403. Prometheus gets the
   ClusterRole `virtualtarget-metrics-reader` (deploy/) for it.
3. Otherwise the metrics.

Both reviews cost an apiserver round trip, and Prometheus scrapes every few seconds with
the same token: a decision is remembered for `ttl` seconds by the token's digest (the
token itself is never kept). An apiserver that cannot answer is a 503, not remembered.
The API calls go through `post(path, body) -> body`, which each component supplies with
its own client; nothing here imports a Kubernetes client.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["METRICS_PATH", "SUBJECT_ACCESS_REVIEWS", "TOKEN_REVIEWS", "Answer", "ScrapeAuth"]

METRICS_PATH = "/metrics"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

Post = Callable[[str, dict[str, Any]], Mapping[str, Any]]  # (API path, body) -> answer


@dataclass(frozen=True, slots=True)
class Answer:
    status: int  # 200, 401, 403 or 503
    message: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


_ALLOWED = Answer(200, "ok")


def _bearer(header: str | None) -> str:
    scheme, _, token = (header or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@dataclass
class ScrapeAuth:
    post: Post
    path: str = METRICS_PATH
    ttl: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _seen: dict[bytes, tuple[float, Answer]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, authorization: str | None) -> Answer:
        """The answer for a request carrying this `Authorization` header."""
        token = _bearer(authorization)
        if not token:
            return Answer(401, "Unauthorized: a bearer token is required")
        digest = hashlib.sha256(token.encode()).digest()
        now = self.clock()
        with self._lock:
            remembered = self._seen.get(digest)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        try:
            answer = self._review(token)
        except Exception as exc:  # the apiserver is unreachable or refused the review
            return Answer(503, f"cannot review the token with the apiserver: {exc}")
        with self._lock:
            if len(self._seen) > 1024:  # tokens rotate; forget the expired ones
                self._seen = {k: v for k, v in self._seen.items() if v[0] > now}
            self._seen[digest] = (now + self.ttl, answer)
        return answer

    def _review(self, token: str) -> Answer:
        review = self.post(
            TOKEN_REVIEWS,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return Answer(401, "Unauthorized: the token is not valid")
        user = status.get("user") or {}
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": list(user.get("groups") or []),
            "nonResourceAttributes": {"path": self.path, "verb": "get"},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = dict(user["extra"])
        access = self.post(
            SUBJECT_ACCESS_REVIEWS,
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        if (access.get("status") or {}).get("allowed"):
            return _ALLOWED
        return Answer(
            403,
            f'Forbidden: user "{spec["user"]}" may not get {self.path} '
            "(bind the ClusterRole virtualtarget-metrics-reader)",
        )
