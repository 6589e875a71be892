"""`post(path, body)` over the official Kubernetes client, for components that have no
JSON client of their own (the webhook's cluster access is the `kubernetes` ApiClient)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["poster"]


def poster(
    api_client: Any, timeout: float = 5.0
) -> Callable[[str, dict[str, Any]], Mapping[str, Any]]:
    """A `post(path, body) -> body` that raises RuntimeError on a non-2xx answer."""

    def post(path: str, body: dict[str, Any]) -> Mapping[str, Any]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        method, url, headers, data, params = api_client.param_serialize(
            "POST", path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = api_client.call_api(method, url, headers, data, params, _request_timeout=timeout)
        text = response.read()
        if not 200 <= response.status < 300:
            raise RuntimeError(f"POST {path}: HTTP {response.status}")
        answer: Mapping[str, Any] = json.loads(text)
        return answer

    return post
