"""The metrics exposition: counts, cumulative latency buckets and rejected bodies."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from api.imagepolicy import ImagePolicy
from scrape.settings import IMAGE_ALLOW_LIST_METRIC
from tests.unit.test_webhook_support import schema_source
from webhook.admission import Admission
from webhook.app import create_app
from webhook.metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = metrics.exposition().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_requests_denials_and_latency_buckets_are_counted_per_label_set() -> None:
    metrics = Metrics()
    for seconds, allowed in ((0.0004, True), (0.001, False), (0.003, True), (60.0, False)):
        metrics.record("ExporterSet", "CREATE", "/validate-x", allowed, seconds)
    metrics.record("Exporter", "UPDATE", "/mutate-y", True, 0.0002)
    metrics.reject("/validate-x", 413)
    metrics.reject("/validate-x", 413)
    got = samples(metrics)
    labels = {("kind", "ExporterSet"), ("operation", "CREATE"), ("endpoint", "/validate-x")}

    def at(name: str, **extra: str) -> float:
        return got[(name, frozenset(labels | set(extra.items())))]

    assert at("virtualtarget_webhook_requests_total") == 4
    assert at("virtualtarget_webhook_denials_total") == 2
    # Buckets are cumulative and inclusive of their upper bound (0.001 falls in le=0.001).
    assert at("virtualtarget_webhook_latency_seconds_bucket", le="0.0005") == 1
    assert at("virtualtarget_webhook_latency_seconds_bucket", le="0.001") == 2
    assert at("virtualtarget_webhook_latency_seconds_bucket", le="0.005") == 3
    assert at("virtualtarget_webhook_latency_seconds_bucket", le="10.0") == 3
    assert at("virtualtarget_webhook_latency_seconds_bucket", le="+Inf") == 4
    assert at("virtualtarget_webhook_latency_seconds_count") == 4
    assert abs(at("virtualtarget_webhook_latency_seconds_sum") - 60.0044) < 1e-9
    other = frozenset({("kind", "Exporter"), ("operation", "UPDATE"), ("endpoint", "/mutate-y")})
    assert got[("virtualtarget_webhook_requests_total", other)] == 1
    assert got[("virtualtarget_webhook_denials_total", other)] == 0
    rejected = frozenset({("endpoint", "/validate-x"), ("status", "413")})
    assert got[("virtualtarget_webhook_rejected_bodies_total", rejected)] == 2


def test_an_unused_registry_exposes_the_families_without_samples() -> None:
    text = Metrics().exposition().decode()
    for name in ("requests", "denials", "latency_seconds", "rejected_bodies"):
        assert f"# TYPE virtualtarget_webhook_{name}" in text


def test_reviews_answered_5xx_are_counted_by_endpoint_and_code() -> None:
    metrics = Metrics()
    metrics.record("ExporterSet", "CREATE", "/validate-x", False, 0.01, 503)
    metrics.record("ExporterSet", "CREATE", "/validate-x", False, 0.01, 422)  # a denial
    metrics.record("ExporterSet", "CREATE", "/validate-x", False, 0.01, 500)
    metrics.record("ExporterSet", "CREATE", "/validate-x", False, 0.01, 500)
    got = samples(metrics)
    errors = {
        dict(labels)["code"]: value
        for (name, labels), value in got.items()
        if name == "virtualtarget_webhook_server_errors_total"
    }
    assert errors == {"500": 2, "503": 1}


def test_the_serving_certificates_expiry_is_a_gauge() -> None:
    got = samples(Metrics(certificate_expiry=lambda: 1_900_000_000.0))
    expiry = ("virtualtarget_webhook_certificate_expiration_timestamp_seconds", frozenset())
    assert got[expiry] == 1_900_000_000.0


def test_the_5xx_count_of_every_endpoint_starts_at_zero() -> None:
    # A series born at its first error has no earlier sample: increase() would miss it.
    metrics = Metrics(endpoints=["/validate-x", "/mutate-y"])
    metrics.record("ExporterSet", "CREATE", "/validate-x", False, 0.01, 503)
    errors = {
        (dict(labels)["endpoint"], dict(labels)["code"]): value
        for (name, labels), value in samples(metrics).items()
        if name == "virtualtarget_webhook_server_errors_total"
    }
    assert errors == {
        ("/validate-x", "500"): 0,
        ("/validate-x", "503"): 1,
        ("/mutate-y", "500"): 0,
        ("/mutate-y", "503"): 0,
    }


def test_the_image_allow_list_setting_is_exposed_as_the_app_was_started() -> None:
    """0 for a webhook that admits any image, 1 with a list: an alert can name it."""
    open_app = create_app(Admission(schema_source))
    listed = create_app(
        Admission(schema_source, image_policy=ImagePolicy.from_settings(["quay.io/x/"], False))
    )
    for app, value in ((open_app, 0), (listed, 1)):
        got = samples(app.state.metrics)
        assert got[(IMAGE_ALLOW_LIST_METRIC, frozenset())] == value
