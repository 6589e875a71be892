"""Every path the rendered webhook configurations call is answered by the webhook app."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from harness.deploy_render import WEBHOOK_CONFIGURATION_KINDS, render_overlay
from tests.unit.test_webhook_support import review
from webhook.admission import Admission
from webhook.app import create_app
from webhook.schemas import crd_schema


def review_for(rule: dict[str, Any], uid: str) -> dict[str, Any]:
    """A well-formed AdmissionReview for the first kind the rule matches."""
    group, version, plural = rule["apiGroups"][0], rule["apiVersions"][0], rule["resources"][0]
    kind = {
        "virtualtargetclasses": "VirtualTargetClass",
        "exportersets": "ExporterSet",
        "exporters": "Exporter",
    }[plural]
    obj = {
        "apiVersion": f"{group}/{version}",
        "kind": kind,
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {},
    }
    return review(obj, operation=rule["operations"][0], uid=uid)


async def answers(calls: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
    app = create_app(Admission(schema_source=crd_schema))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://webhook") as client:
        return [await client.post(path, json=body) for path, body in calls]


def test_each_rendered_webhook_path_is_served_with_an_admission_review() -> None:
    hooks = [
        hook
        for obj in render_overlay("self-signed")
        if obj["kind"] in WEBHOOK_CONFIGURATION_KINDS
        for hook in obj["webhooks"]
    ]
    calls = [
        (hook["clientConfig"]["service"]["path"], review_for(hook["rules"][0], f"uid-{i}"))
        for i, hook in enumerate(hooks)
    ]
    calls.append(("/validate-nothing-v1-unregistered", review_for(hooks[0]["rules"][0], "control")))
    *served, unregistered = asyncio.run(answers(calls))
    assert unregistered.status_code == 404  # the app does not answer any path at all
    for (path, body), response in zip(calls, served, strict=False):
        assert response.status_code == 200, (path, response.text)
        answer = response.json()
        assert answer["kind"] == "AdmissionReview", path
        assert answer["response"]["uid"] == body["request"]["uid"], path
