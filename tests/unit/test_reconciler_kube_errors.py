"""Error answers become ApiError whatever their body, so a resource that is not served
(plain-text "404 page not found") reads as 404 and the cache treats it as empty."""

from __future__ import annotations

from reconciler.runtime.kube import _status_body


def test_status_object_is_kept() -> None:
    body = b'{"kind":"Status","reason":"NotFound","message":"leases.jumpstarter.dev not found"}'
    assert _status_body(body)["reason"] == "NotFound"


def test_plain_text_becomes_the_message() -> None:
    assert _status_body(b"404 page not found\n") == {"message": "404 page not found"}


def test_empty_and_non_object_bodies() -> None:
    assert _status_body(b"") == {}
    assert _status_body(b"[1, 2]") == {"message": "[1, 2]"}
