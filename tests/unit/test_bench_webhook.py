"""The webhook benchmark measures what it says: every review it sends is admitted.

A benchmark whose reviews were denied, or answered with warnings, would time an
error path; these go through the benchmark's own app in-process.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from bench.webhook import COUNTER, MEMORY, UNSEEN, reviews, server_app


def answer(path: str, review: dict[str, Any]) -> dict[str, Any]:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=server_app())
        async with httpx.AsyncClient(transport=transport, base_url="https://bench") as client:
            return await client.post(path + "?timeout=10s", content=json.dumps(review))

    response = asyncio.run(go())
    assert response.status_code == 200
    body: dict[str, Any] = response.json()["response"]
    return body


@pytest.mark.parametrize("name", list(reviews()))
def test_every_benchmarked_review_is_admitted_without_warnings(name: str) -> None:
    path, review = reviews()[name]
    text = json.dumps(review)
    for counter in (1, 2, 199_999):  # as the wrk script fills the template in
        filled = text.replace(COUNTER, str(counter)).replace(MEMORY, str(1024 + counter))
        response = answer(path, json.loads(filled))
        assert response["allowed"] is True and "warnings" not in response, response
        assert ("patch" in response) == (name == "mutate")
        if name != UNSEEN:
            break
