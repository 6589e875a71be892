"""Prometheus metrics of the admission endpoints: requests, denials and latency by kind,
operation and endpoint. Each app owns its registry, so tests can build many apps.

Recording is plain arithmetic on one event loop's counters; the Prometheus families are
built only when `/metrics` is scraped. prometheus_client's own Counter and Histogram
take a lock per increment, which cost more per review than any single admission check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from scrape.histogram import Histogram
from scrape.settings import image_allow_list_gauge
from webhook.envelope import SERVER_ERROR_CODES

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LABELS = ["kind", "operation", "endpoint"]
# Admission answers in milliseconds; the apiserver gives up after about 10 s.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Series:
    """The counts of one (kind, operation, endpoint)."""

    __slots__ = ("denials", "latency", "requests")

    def __init__(self) -> None:
        self.requests = 0
        self.denials = 0
        self.latency = Histogram(_BUCKETS)


class Metrics(Collector):
    """`certificate_expiry` reports when the certificate being served expires (UNIX
    seconds), so an expiring certificate can alert before the apiserver refuses it.

    The 5xx count of every one of `endpoints` is exposed from zero: Prometheus's
    `increase()` needs a sample before the first error to see that error at all.

    `image_allow_list`: whether admission checks images against an allow-list (exposed
    so that a webhook admitting any image can alert)."""

    def __init__(
        self,
        certificate_expiry: Callable[[], float] | None = None,
        endpoints: Iterable[str] = (),
        image_allow_list: bool = False,
    ) -> None:
        self.certificate_expiry = certificate_expiry
        self.image_allow_list = image_allow_list
        self._series: dict[tuple[str, str, str], _Series] = {}
        self._rejected: dict[tuple[str, str], int] = {}
        self._server_errors: dict[tuple[str, str], int] = {
            (endpoint, str(code)): 0 for endpoint in endpoints for code in SERVER_ERROR_CODES
        }
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def record(
        self,
        kind: str,
        operation: str,
        endpoint: str,
        allowed: bool,
        seconds: float,
        code: int = 200,
    ) -> None:
        """One answered review; `code` is the denial's status code (5xx: the webhook could
        not decide: an internal error, or the cluster it needed did not answer)."""
        key = (kind, operation, endpoint)
        if not allowed and code >= 500:
            failed = (endpoint, str(code))
            self._server_errors[failed] = self._server_errors.get(failed, 0) + 1
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series()
        series.requests += 1
        if not allowed:
            series.denials += 1
        series.latency.observe(seconds)

    def reject(self, endpoint: str, status: int) -> None:
        """A body that was not a usable AdmissionReview, answered with HTTP `status`."""
        key = (endpoint, str(status))
        self._rejected[key] = self._rejected.get(key, 0) + 1

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "virtualtarget_webhook_requests", "Admission reviews answered.", labels=_LABELS
        )
        denials = CounterMetricFamily(
            "virtualtarget_webhook_denials", "Admission reviews denied.", labels=_LABELS
        )
        latency = HistogramMetricFamily(
            "virtualtarget_webhook_latency_seconds",
            "Time from request received to response built.",
            labels=_LABELS,
        )
        for key, series in sorted(self._series.items()):
            labels = list(key)
            requests.add_metric(labels, series.requests)
            denials.add_metric(labels, series.denials)
            latency.add_metric(labels, series.latency.cumulative(), series.latency.total)
        rejected = CounterMetricFamily(
            "virtualtarget_webhook_rejected_bodies",
            "Bodies that were not a usable AdmissionReview, by HTTP status.",
            labels=["endpoint", "status"],
        )
        for (endpoint, status), count in sorted(self._rejected.items()):
            rejected.add_metric([endpoint, status], count)
        server_errors = CounterMetricFamily(
            "virtualtarget_webhook_server_errors",
            "Reviews answered with a 5xx status: the webhook could not decide.",
            labels=["endpoint", "code"],
        )
        for (endpoint, code), count in sorted(self._server_errors.items()):
            server_errors.add_metric([endpoint, code], count)
        yield from (requests, denials, latency, rejected, server_errors)
        yield image_allow_list_gauge(self.image_allow_list)
        if self.certificate_expiry is not None:
            yield GaugeMetricFamily(
                "virtualtarget_webhook_certificate_expiration_timestamp_seconds",
                "When the serving certificate expires (UNIX time).",
                value=self.certificate_expiry(),
            )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
