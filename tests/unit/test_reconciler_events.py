"""Events about a pool: what `kubectl describe exporterset` shows of the reconciler."""

from __future__ import annotations

from datetime import UTC, datetime

from pool.model.reasons import SCALE_UP
from reconciler.runtime.events import REPORTING_CONTROLLER, build_event

SET = {
    "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
    "kind": "ExporterSet",
    "metadata": {"name": "pool", "namespace": "ns", "uid": "u-1"},
}
EXPORTER = {
    "apiVersion": "jumpstarter.dev/v1alpha1",
    "kind": "Exporter",
    "metadata": {"name": "pool-0", "namespace": "ns", "uid": "u-2"},
}
NOW = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC)


def test_event_regards_the_set_and_relates_the_instance() -> None:
    event = build_event(
        SET, reason=SCALE_UP, action="Create", note="created", now=NOW, related=EXPORTER
    )
    assert event["apiVersion"] == "v1"  # core Events: what Jumpstarter's operator's Role grants
    assert event["metadata"] == {"generateName": "pool-", "namespace": "ns"}
    assert event["eventTime"] == "2026-01-02T03:04:05.000678Z"
    assert event["reportingComponent"] == REPORTING_CONTROLLER
    assert event["reportingInstance"]
    assert event["involvedObject"]["uid"] == "u-1"
    assert event["involvedObject"]["kind"] == "ExporterSet"
    assert event["related"]["name"] == "pool-0"
    assert (event["type"], event["reason"], event["action"]) == (
        "Normal",
        SCALE_UP,
        "Create",
    )


def test_notes_are_cut_to_the_api_limit_and_warnings_typed() -> None:
    event = build_event(SET, reason="R", action="A", note="x" * 5000, now=NOW, warning=True)
    assert len(event["message"]) == 1024
    assert event["type"] == "Warning"
    assert "related" not in event
