"""Prometheus metrics of the admission endpoints: requests, denials and latency by kind,
operation and endpoint. Each app owns its registry, so tests can build many apps.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LABELS = ("kind", "operation", "endpoint")
# Admission answers in milliseconds; the apiserver gives up after about 10 s.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self._by_labels: dict[tuple[str, str, str], tuple[Counter, Counter, Histogram]] = {}
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "virtualtarget_webhook_requests_total",
            "Admission reviews answered.",
            _LABELS,
            registry=self.registry,
        )
        self.denials = Counter(
            "virtualtarget_webhook_denials_total",
            "Admission reviews denied.",
            _LABELS,
            registry=self.registry,
        )
        self.latency = Histogram(
            "virtualtarget_webhook_latency_seconds",
            "Time from request received to response built.",
            _LABELS,
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rejected = Counter(
            "virtualtarget_webhook_rejected_bodies_total",
            "Bodies that were not a usable AdmissionReview, by HTTP status.",
            ("endpoint", "status"),
            registry=self.registry,
        )

    def record(
        self, kind: str, operation: str, endpoint: str, allowed: bool, seconds: float
    ) -> None:
        requests, denials, latency = self._children(kind, operation, endpoint)
        requests.inc()
        if not allowed:
            denials.inc()
        latency.observe(seconds)

    def _children(
        self, kind: str, operation: str, endpoint: str
    ) -> tuple[Counter, Counter, Histogram]:
        # labels() takes a lock and builds a key on every call; the label sets are few.
        key = (kind, operation, endpoint)
        children = self._by_labels.get(key)
        if children is None:
            children = self._by_labels[key] = (
                self.requests.labels(*key),
                self.denials.labels(*key),
                self.latency.labels(*key),
            )
        return children

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
