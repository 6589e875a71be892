"""Who may scrape /metrics (the apiserver's TokenReview and SubjectAccessReview answers),
and the reconciler's small HTTP(S) server."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from certs.authority import ensure_certificates
from certs.reload import serving_context
from scrape.auth import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, ScrapeAuth
from scrape.http import TEXT, parse_address, serve


class Apiserver:
    """Scripted review answers, and the requests they answered."""

    def __init__(self, users: dict[str, str], allowed: set[str]) -> None:
        self.users, self.allowed = users, allowed
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.down = False

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.down:
            raise ConnectionRefusedError("connection refused")
        self.requests.append((path, body))
        if path == TOKEN_REVIEWS:
            user = self.users.get(body["spec"]["token"])
            if user is None:
                return {"status": {"authenticated": False}}
            return {"status": {"authenticated": True, "user": {"username": user, "groups": ["g"]}}}
        assert path == SUBJECT_ACCESS_REVIEWS
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


def auth(server: Apiserver) -> tuple[ScrapeAuth, list[float]]:
    clock = [0.0]
    return ScrapeAuth(server.post, clock=lambda: clock[0]), clock


def test_no_token_and_an_unknown_token_are_401_a_user_without_the_role_403() -> None:
    server = Apiserver({"p": "system:serviceaccount:monitoring:prometheus", "n": "nobody"}, set())
    check, _ = auth(server)
    assert check.check(None).status == 401
    assert check.check("Basic dXNlcg==").status == 401
    assert check.check("Bearer unknown").status == 401
    answer = check.check("Bearer n")
    assert answer.status == 403
    assert answer.message == (
        'Forbidden: user "nobody" may not get /metrics '
        "(bind the ClusterRole virtualtarget-metrics-reader)"
    )


def test_the_access_review_asks_for_get_on_the_metrics_path_as_the_user() -> None:
    server = Apiserver({"p": "prometheus"}, {"prometheus"})
    check, _ = auth(server)
    assert check.check("Bearer p").allowed
    path, body = server.requests[-1]
    assert path == SUBJECT_ACCESS_REVIEWS
    assert body["spec"] == {
        "user": "prometheus",
        "groups": ["g"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


def test_decisions_are_remembered_for_the_ttl_and_outages_are_503_not_remembered() -> None:
    server = Apiserver({"p": "prometheus"}, {"prometheus"})
    check, clock = auth(server)
    assert check.check("Bearer p").allowed
    assert check.check("bearer p").allowed
    assert len(server.requests) == 2  # one TokenReview and one SubjectAccessReview
    clock[0] += 11
    server.down = True
    answer = check.check("Bearer p")
    assert answer.status == 503 and "connection refused" in answer.message
    server.down = False
    assert check.check("Bearer p").allowed
    assert len(server.requests) == 4


@pytest.mark.parametrize(
    ("value", "expected"),
    [(":8443", ("0.0.0.0", 8443)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("0", None)],
)
def test_bind_addresses_as_controller_runtime_spells_them(value: str, expected: Any) -> None:
    assert parse_address(value) == expected


@pytest.mark.parametrize("bad", ["8443", "host:port", ":70000"])
def test_bad_bind_addresses_say_what_is_expected(bad: str) -> None:
    with pytest.raises(ValueError, match=r"expected \[HOST\]:PORT, or 0 to disable"):
        parse_address(bad)


def test_server_answers_routes_over_tls_and_turns_a_failing_route_into_500(
    tmp_path: Path,
) -> None:
    certs = ensure_certificates(tmp_path, "metrics", "ns", ["127.0.0.1"])

    def broken(_headers: Any) -> Any:
        raise RuntimeError("boom")

    routes = {
        "/ok": lambda headers: (200, TEXT, headers.get("X-Probe", "").encode()),
        "/broken": broken,
    }
    server = serve(("127.0.0.1", 0), routes, serving_context(tmp_path))
    try:
        ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
        base = f"https://127.0.0.1:{server.port}"
        request = urllib.request.Request(f"{base}/ok", headers={"X-Probe": "yes"})
        with urllib.request.urlopen(request, context=ctx, timeout=5) as response:
            assert (response.status, response.read()) == (200, b"yes")
        for path, status in (("/broken", 500), ("/missing", 404)):
            with pytest.raises(urllib.error.HTTPError) as failed:
                urllib.request.urlopen(f"{base}{path}", context=ctx, timeout=5)
            assert failed.value.code == status
    finally:
        server.stop()
