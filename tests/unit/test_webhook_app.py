"""The HTTP surface, in-process through httpx.ASGITransport: envelope, limits, paths,
health, metrics, and malformed reviews (never a 500)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_webhook_support import (
    a_class,
    a_set,
    an_exporter,
    apply_patch,
    decoded_patch,
    review,
    schema_source,
)
from webhook.admission import Admission
from webhook.app import budget_seconds, create_app
from webhook.clusterview import StaticView
from webhook.decode import MAX_BODY_BYTES, DecodeError, read_body
from webhook.envelope import SERVER_ERROR_CODES
from webhook.routes import ENDPOINTS

SET_MUTATE = "/mutate-virtualtarget-jumpstarter-dev-v1alpha1-exporterset"
SET_VALIDATE = "/validate-virtualtarget-jumpstarter-dev-v1alpha1-exporterset"
CLASS_VALIDATE = "/validate-virtualtarget-jumpstarter-dev-v1alpha1-virtualtargetclass"
EXPORTER_MUTATE = "/mutate-jumpstarter-dev-v1alpha1-exporter"

APP = create_app(Admission(schema_source, StaticView([a_class()])))


def call(path: str, body: Any, *, raw: bytes | None = None, method: str = "POST") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=APP)
        async with httpx.AsyncClient(transport=transport, base_url="https://webhook") as client:
            content = raw if raw is not None else json.dumps(body).encode()
            if method == "GET":
                return await client.get(path)
            return await client.post(
                path, content=content, headers={"content-type": "application/json"}
            )

    return asyncio.run(go())


def test_paths_follow_the_kubebuilder_convention() -> None:
    assert sorted(e.path for e in ENDPOINTS) == sorted(
        [
            "/mutate-virtualtarget-jumpstarter-dev-v1alpha1-virtualtargetclass",
            "/validate-virtualtarget-jumpstarter-dev-v1alpha1-virtualtargetclass",
            SET_MUTATE,
            SET_VALIDATE,
            EXPORTER_MUTATE,
            "/validate-jumpstarter-dev-v1alpha1-exporter",
        ]
    )
    served = {getattr(route, "path", "") for route in APP.routes}
    assert {e.path for e in ENDPOINTS} <= served


def test_mutate_echoes_the_uid_and_returns_a_patch_that_applies() -> None:
    obj = a_set()
    answer = call(SET_MUTATE, review(obj, uid="abc-123"))
    assert answer.status_code == 200
    body = answer.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == "abc-123" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    defaulted = apply_patch(obj, decoded_patch(response))
    assert defaulted["spec"]["maxReplicas"] == 4
    second = call(SET_MUTATE, review(defaulted))
    assert "patch" not in second.json()["response"]


def test_exporter_enabled_is_defaulted() -> None:
    response = call(EXPORTER_MUTATE, review(an_exporter())).json()["response"]
    assert decoded_patch(response) == [{"op": "add", "path": "/spec/enabled", "value": True}]


def test_nothing_is_patched_on_delete_and_validate_never_patches() -> None:
    deleted = call(SET_MUTATE, review(None, old=a_set(), operation="DELETE")).json()["response"]
    assert deleted["allowed"] and "patch" not in deleted
    validated = call(SET_VALIDATE, review(a_set())).json()["response"]
    assert validated["allowed"] and "patch" not in validated


def test_denial_names_every_field_in_kubernetes_style() -> None:
    obj = a_set(minReplicas=5, maxReplicas=4, scaleDownCooldown="1d")
    response = call(SET_VALIDATE, review(obj)).json()["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == (
        'ExporterSet.virtualtarget.jumpstarter.dev "pool-a" is invalid: ['
        "spec.minReplicas: Invalid value: 5: must be less than or equal to spec.maxReplicas (4), "
        'spec.scaleDownCooldown: Invalid value: "1d": must be a non-negative Go duration such '
        "as 300s, 5m or 1h30m]"
    )
    causes = status["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.minReplicas", "spec.scaleDownCooldown"]
    assert causes[0]["reason"] == "FieldValueInvalid"
    assert causes[0]["message"].startswith("Invalid value: 5:")


def test_a_single_error_has_no_brackets() -> None:
    response = call(SET_VALIDATE, review(a_set(minReplicas=-1))).json()["response"]
    assert response["status"]["message"] == (
        'ExporterSet.virtualtarget.jumpstarter.dev "pool-a" is invalid: '
        "spec.minReplicas: Invalid value: -1: should be a non-negative integer"
    )


def test_a_kind_the_endpoint_does_not_serve_is_denied() -> None:
    response = call(SET_VALIDATE, review(a_class())).json()["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert (
        "serves ExporterSet.virtualtarget.jumpstarter.dev/v1alpha1, not"
        in (response["status"]["message"])
    )


def test_warnings_are_at_most_120_characters() -> None:
    obj = a_set(virtualTargetClassName="a-class-with-a-very-long-name-" + "x" * 100)
    response = call(SET_VALIDATE, review(obj)).json()["response"]
    assert response["allowed"] and response["warnings"]
    assert all(len(w) <= 120 for w in response["warnings"])


def test_class_delete_in_use_is_denied() -> None:
    app = create_app(Admission(schema_source, StaticView([a_class(), a_set()])))

    async def go() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://w") as client:
            body = review(None, old=a_class(), operation="DELETE")
            answer = await client.post(CLASS_VALIDATE, json=body)
            result: dict[str, Any] = answer.json()["response"]
            return result

    response = asyncio.run(go())
    assert response["allowed"] is False
    assert "in use by ExporterSets pool-a" in response["status"]["message"]


def test_not_an_admission_review_is_a_400_with_a_json_error() -> None:
    for raw in (b"", b"{", b"[]", b'"x"', json.dumps({"kind": "Pod"}).encode()):
        answer = call(SET_VALIDATE, None, raw=raw)
        assert answer.status_code == 400
        assert answer.headers["content-type"].startswith("application/json")
        assert "error" in answer.json()
    no_uid = review(a_set())
    no_uid["request"]["uid"] = ""
    assert call(SET_VALIDATE, no_uid).status_code == 400


def test_a_body_over_3_mib_is_a_413() -> None:
    obj = a_set()
    obj["metadata"]["annotations"] = {"big": "x" * MAX_BODY_BYTES}
    answer = call(SET_VALIDATE, review(obj))
    assert answer.status_code == 413 and "error" in answer.json()


def test_body_limits_are_enforced_while_reading_chunks() -> None:
    def channel(*messages: dict[str, Any]) -> Any:
        queue = list(messages)

        async def receive() -> dict[str, Any]:
            return queue.pop(0)

        return receive

    def read(receive: Any, headers: list[tuple[bytes, bytes]]) -> bytes | int:
        try:
            return asyncio.run(read_body(receive, headers))
        except DecodeError as exc:
            return exc.status

    half = b"x" * (MAX_BODY_BYTES // 2 + 1)
    chunked = channel(
        {"type": "http.request", "body": half, "more_body": True},
        {"type": "http.request", "body": half, "more_body": True},
    )
    assert read(chunked, []) == 413  # no Content-Length: refused at the chunk that overflows
    declared = [(b"content-length", str(MAX_BODY_BYTES + 1).encode())]
    assert read(channel(), declared) == 413  # refused before anything is read
    parts = channel(
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b"1}"},
    )
    assert read(parts, [(b"content-length", b"7")]) == b'{"a":1}'
    gone = channel(
        {"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}
    )
    assert read(gone, []) == 400


def test_health_readiness_and_metrics() -> None:
    assert call("/healthz", None, method="GET").status_code == 200
    not_ready = create_app(Admission(schema_source), ready=lambda: False)

    async def readyz() -> int:
        transport = httpx.ASGITransport(app=not_ready)
        async with httpx.AsyncClient(transport=transport, base_url="https://w") as client:
            return (await client.get("/readyz")).status_code

    assert asyncio.run(readyz()) == 503
    call(SET_VALIDATE, review(a_set(minReplicas=-1)))
    text = call("/metrics", None, method="GET").text
    labels = f'endpoint="{SET_VALIDATE}",kind="ExporterSet",operation="CREATE"'
    assert f"virtualtarget_webhook_requests_total{{{labels}}}" in text
    assert f"virtualtarget_webhook_denials_total{{{labels}}}" in text
    assert "virtualtarget_webhook_latency_seconds_bucket" in text
    # Every served path's 5xx counts are there from the start, at zero until an error.
    for endpoint in ENDPOINTS:
        for code in SERVER_ERROR_CODES:
            series = f'code="{code}",endpoint="{endpoint.path}"'
            assert f"virtualtarget_webhook_server_errors_total{{{series}}} 0.0" in text


def test_budget_is_half_the_timeout_capped_at_3s() -> None:
    assert budget_seconds("10s") == 3.0
    assert budget_seconds("2s") == 1.0
    assert budget_seconds(None) == 3.0
    assert budget_seconds("garbage") == 3.0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _mangled(draw: st.DrawFn) -> Any:
    base = review(draw(st.sampled_from([a_set(), a_class(), an_exporter()])))
    request = base["request"]
    for key in draw(st.lists(st.sampled_from(sorted(request)), max_size=3)):
        request[key] = draw(JSON)
    target = draw(st.sampled_from(["object", "spec", "none"]))
    if target == "spec" and isinstance(request.get("object"), dict):
        spec = request["object"].setdefault("spec", {})
        if isinstance(spec, dict):
            spec[draw(st.sampled_from(sorted(spec) or ["x"]))] = draw(JSON)
    elif target == "object":
        request["object"] = draw(JSON)
    return base


mangled_reviews = st.composite(_mangled)()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=mangled_reviews, path=st.sampled_from([e.path for e in ENDPOINTS]))
def test_malformed_reviews_never_produce_a_500(body: Any, path: str) -> None:
    answer = call(path, body)
    assert answer.status_code in (200, 400)
    if answer.status_code == 200:
        response = answer.json()["response"]
        assert response["uid"] == body["request"]["uid"]
        if "patch" in response:
            base64.b64decode(response["patch"])
    else:
        assert "error" in answer.json()


@settings(max_examples=100, deadline=None)
@given(body=JSON, path=st.sampled_from([e.path for e in ENDPOINTS]))
def test_arbitrary_json_bodies_are_answered_400(body: Any, path: str) -> None:
    assert call(path, body).status_code == 400


def test_timeout_is_read_from_the_raw_query() -> None:
    from webhook.app import _timeout

    assert _timeout(b"timeout=10s") == "10s"
    assert _timeout(b"dryRun=All&timeout=2s") == "2s"
    assert _timeout(b"timeouts=1s") is None
    assert _timeout(b"") is None


def test_behind_the_apiserver_the_schema_is_not_checked_twice_the_rule_table_is() -> None:
    """kube-apiserver enforces the CRD's structural schema before calling a validating
    webhook: the server leaves that to it, offline validation does not. The rule table
    runs in both: a CRD that is not ours (Jumpstarter's) carries only some of it as CEL."""
    from webhook.cli import server_admission
    from webhook.decode import decode_review

    endpoint = next(
        e for e in ENDPOINTS if e.kind.kind == "ExporterSet" and e.path.startswith("/validate")
    )
    body = review(a_set(minReplicas=5, maxReplicas=4, recycleStrategy="Sometimes"))
    request = decode_review(json.dumps(body).encode())
    offline = asyncio.run(Admission(schema_source).review(endpoint, request, 1.0))
    rule = "spec.minReplicas: Invalid value: 5: must be less than or equal to spec.maxReplicas (4)"
    assert any(str(e).startswith("spec.recycleStrategy: Unsupported value") for e in offline.errors)
    assert rule in [str(e) for e in offline.errors]
    served = asyncio.run(server_admission(None).review(endpoint, request, 1.0))
    assert [str(e) for e in served.errors] == [rule]


def test_the_rollout_annotation_takes_only_paused() -> None:
    paused = a_set()
    paused["metadata"]["annotations"] = {"virtualtarget.jumpstarter.dev/rollout": "paused"}
    assert call(SET_VALIDATE, review(paused)).json()["response"]["allowed"] is True
    typo = a_set()
    typo["metadata"]["annotations"] = {"virtualtarget.jumpstarter.dev/rollout": "pause"}
    response = call(SET_VALIDATE, review(typo)).json()["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'ExporterSet.virtualtarget.jumpstarter.dev "pool-a" is invalid: '
        "metadata.annotations[virtualtarget.jumpstarter.dev/rollout]: Unsupported value: "
        '"pause": supported values: "paused" (remove the annotation to resume)'
    )
