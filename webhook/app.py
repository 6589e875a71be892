"""The FastAPI application: admission paths from `routes.ENDPOINTS`, health, metrics.

Bodies are decoded by hand (`webhook.decode`) rather than by FastAPI models: the limits
and the 400/413 answers are ours, and unknown fields must reach the defaulter as sent.
Any unexpected failure of a check is answered as a denial, never a 500.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any

from fastapi import FastAPI, Request, Response

from api.duration import parse_go_duration_ns
from scrape.auth import Answer
from webhook.admission import Admission, object_name
from webhook.decode import DecodeError, decode_review, read_body
from webhook.envelope import INTERNAL_ERROR, Outcome, error_body, review_response
from webhook.jsontext import compact_json
from webhook.metrics import CONTENT_TYPE, Metrics
from webhook.routes import ENDPOINTS, Endpoint

__all__ = ["MAX_BUDGET_SECONDS", "budget_seconds", "create_app"]

log = logging.getLogger(__name__)

# Cluster lookups get at most half the apiserver's timeout, and never more than this.
MAX_BUDGET_SECONDS = 3.0
_JSON = "application/json"


def budget_seconds(timeout: str | None) -> float:
    """min(timeout / 2, 3 s) for the apiserver's `?timeout=` (a Go duration such as `10s`)."""
    if timeout:
        try:
            seconds = parse_go_duration_ns(timeout) / 1e9
        except ValueError:
            return MAX_BUDGET_SECONDS
        if seconds > 0:
            return min(seconds / 2, MAX_BUDGET_SECONDS)
    return MAX_BUDGET_SECONDS


@lru_cache(maxsize=64)  # the apiserver sends the same `?timeout=` on every call
def _query_budget(query: bytes) -> float:
    return budget_seconds(_timeout(query))


def _timeout(query: bytes) -> str | None:
    """The `timeout` the apiserver appends (`?timeout=10s`), without parsing the whole
    query into a multi-dict on every review."""
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if name == b"timeout":
            return value.decode("ascii", "replace")
    return None


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(compact_json(body), status_code=status, media_type=_JSON)


MetricsAuth = Callable[[str | None], Answer]  # Authorization header -> answer


def create_app(
    admission: Admission,
    ready: Callable[[], bool] = lambda: True,
    *,
    metrics_auth: MetricsAuth | None = None,
    certificate_expiry: Callable[[], float] | None = None,
) -> FastAPI:
    """The webhook's app. `metrics_auth` guards `/metrics` (`scrape.auth.ScrapeAuth.check`;
    the server always passes one, an app built without it serves metrics to anyone)."""
    app = FastAPI(
        title="virtualtarget admission webhook", docs_url=None, redoc_url=None, openapi_url=None
    )
    metrics = Metrics(
        certificate_expiry,
        endpoints=[e.path for e in ENDPOINTS],
        image_allow_list=admission.image_policy is not None,
    )
    app.state.metrics = metrics

    # Plain Starlette routes: the handlers take the raw Request, so FastAPI's dependency
    # resolution would only cost time on every review.
    for endpoint in ENDPOINTS:
        app.router.add_route(
            endpoint.path, _handler(endpoint, admission, metrics), methods=["POST"]
        )

    async def healthz(_request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def readyz(_request: Request) -> Response:
        if ready():
            return Response("ok", media_type="text/plain")
        return Response("caches not synced", status_code=503, media_type="text/plain")

    async def metrics_endpoint(request: Request) -> Response:
        if metrics_auth is not None:
            # The reviews block on the apiserver (once per token and ttl): off the loop.
            answer = await asyncio.to_thread(metrics_auth, request.headers.get("authorization"))
            if not answer.allowed:
                return Response(answer.message + "\n", answer.status, media_type="text/plain")
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    app.router.add_route("/healthz", healthz, methods=["GET"])
    app.router.add_route("/readyz", readyz, methods=["GET"])
    app.router.add_route("/metrics", metrics_endpoint, methods=["GET"])
    return app


def _handler(
    endpoint: Endpoint, admission: Admission, metrics: Metrics
) -> Callable[[Request], Awaitable[Response]]:
    label, qualified = endpoint.path, endpoint.kind.qualified

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        try:
            review = decode_review(await read_body(request.receive, request.scope["headers"]))
        except DecodeError as exc:
            metrics.reject(label, exc.status)
            return _json(error_body(exc.message), exc.status)
        try:
            outcome = await admission.review(
                endpoint, review, _query_budget(request.scope["query_string"])
            )
        except Exception:  # a bug in a check must not turn into a 500 for the apiserver
            log.exception(
                "admission of %s %s/%s failed", review.kind, review.namespace, review.name
            )
            outcome = Outcome(
                code=INTERNAL_ERROR,
                reason="InternalError",
                message="internal error in the admission webhook; see its log",
            )
        answer = review_response(review.uid, outcome, qualified, object_name(review))
        metrics.record(
            review.kind or "unknown",
            review.operation,
            label,
            outcome.allowed,
            time.perf_counter() - started,
            outcome.code,
        )
        return _json(answer)

    return handle
