"""The bucket table of docs/design.md §4, one rule per test."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pool.model.adapt import exporter_view
from pool.model.timefmt import format_time
from pool.model.views import ExporterView, HookRecord, PodView
from pool.rules.buckets import Bucket, classify, owes_after_lease
from tests.unit.test_reconciler_support import T0, booting, ready

NONE: frozenset[str] = frozenset()


def bucket(exporter, pods=(), leased=NONE, recycle="ExitAndReplace", release=True):  # type: ignore[no-untyped-def]
    return classify(exporter, tuple(pods), leased, recycle, release)


def test_ready_unleased_is_available() -> None:
    assert bucket(ready("a")) is Bucket.AVAILABLE


@pytest.mark.parametrize("status", ["", "Unspecified", "Available"])
def test_available_uses_the_lease_controller_statuses(status: str) -> None:
    assert bucket(ready("a", exporter_status=status)) is Bucket.AVAILABLE


@pytest.mark.parametrize("status", ["Offline"])
def test_other_status_is_provisioning(status: str) -> None:
    assert bucket(ready("a", exporter_status=status)) is Bucket.PROVISIONING


@pytest.mark.parametrize(
    "status",
    [
        "BeforeLeaseHook",
        "LeaseReady",
        "AfterLeaseHook",
        "BeforeLeaseHookFailed",
        "AfterLeaseHookFailed",
    ],
)
def test_hook_statuses_are_busy(status: str) -> None:
    assert bucket(ready("a", exporter_status=status)) is Bucket.BUSY


def test_leased_by_live_lease_or_lease_ref() -> None:
    assert bucket(ready("a"), leased={"a"}) is Bucket.BUSY
    assert bucket(ready("a", lease_ref="l1")) is Bucket.BUSY


@pytest.mark.parametrize(
    ("before", "after", "owes"),
    [
        ("Succeeded", None, True),
        ("Succeeded", "Running", True),
        ("Failed", "Failed", True),
        ("Succeeded", "Succeeded", False),
        ("Skipped", "Skipped", False),
        (None, None, False),
    ],
)
def test_owes_after_lease(before: str | None, after: str | None, owes: bool) -> None:
    hooks = HookRecord("l1", "u1", before, after)
    exporter = ready("a", records_lease_hooks=True, hooks=hooks)
    assert owes_after_lease(exporter) is owes
    # Owing beats the reported status: "whatever status it reports".
    expected = Bucket.BUSY if owes else (Bucket.RELEASED if hooks.lease_name else Bucket.AVAILABLE)
    assert bucket(exporter) is expected


def test_record_is_ignored_when_the_exporter_does_not_record_hooks() -> None:
    hooks = HookRecord("l1", "u1", "Succeeded", None)
    assert not owes_after_lease(ready("a", records_lease_hooks=False, hooks=hooks))


def test_booting_is_provisioning() -> None:
    assert bucket(booting("a")) is Bucket.PROVISIONING


def test_disabled_is_draining_and_deleting_is_terminating() -> None:
    assert bucket(ready("a", enabled=False)) is Bucket.DRAINING
    assert bucket(ready("a", deleting=True, lease_ref="l1")) is Bucket.TERMINATING


def test_finished_pod_terminates_only_under_exit_and_replace_and_not_busy() -> None:
    done = [PodView("a", "a", "Succeeded")]
    served = ready("a", online=False)  # it registered: its Pod finished, it did not fail
    assert bucket(served, done) is Bucket.TERMINATING
    assert bucket(served, done, recycle="InPlaceReuse", release=False) is Bucket.PROVISIONING
    assert bucket(ready("a", lease_ref="l1"), done) is Bucket.BUSY


def test_pod_ended_before_registering_or_nonzero_exit_is_failed_whatever_the_strategy() -> None:
    done = [PodView("a", "a", "Succeeded", exited=True, exit_code=0)]
    for recycle in ("ExitAndReplace", "InPlaceReuse"):
        assert bucket(booting("a"), done, recycle=recycle) is Bucket.FAILED
    crashed = [PodView("a", "a", "Failed", exited=True, exit_code=2)]
    assert bucket(ready("a"), crashed) is Bucket.FAILED
    # registered before this Pod was created: it did not register since, so it failed
    new_pod = [PodView("a", "a", "Succeeded", created=T0 + timedelta(minutes=1))]
    assert bucket(ready("a", registered_at=T0), new_pod) is Bucket.FAILED
    assert bucket(ready("a", registered_at=T0 + timedelta(minutes=2)), new_pod) is not (
        Bucket.FAILED
    )
    # exited while the Pod still runs (its sidecar stopping): not available any more
    exited = [PodView("a", "a", "Running", exited=True, exit_code=0)]
    assert bucket(ready("a"), exited, recycle="InPlaceReuse") is Bucket.PROVISIONING


def test_a_registered_false_written_at_creation_is_no_registration() -> None:
    """Jumpstarter 0.9.0's controller writes Registered False ("Unregister") on an
    Exporter's first reconcile, after its Pod may have been created: an exporter that then
    ends without registering failed. One that registered, reported and unregistered on
    its way out (Registered False again, `lastSeen` after the Pod's creation) did not."""
    pod_at = T0 + timedelta(seconds=1)
    done = [PodView("a", "a", "Succeeded", created=pod_at, exited=True, exit_code=0)]

    def exporter(**status: object) -> ExporterView:
        obj = {"metadata": {"name": "a", "creationTimestamp": format_time(T0)}, "status": status}
        return exporter_view(obj)

    unregistered = {"type": "Registered", "status": "False", "reason": "Unregister"}
    first_reconcile = exporter(
        conditions=[{**unregistered, "lastTransitionTime": format_time(T0 + timedelta(seconds=2))}]
    )
    assert first_reconcile.registered_at is None
    assert bucket(first_reconcile, done) is Bucket.FAILED
    said_goodbye = exporter(
        conditions=[{**unregistered, "lastTransitionTime": format_time(T0 + timedelta(seconds=9))}],
        lastSeen=format_time(T0 + timedelta(seconds=8)),
    )
    assert bucket(said_goodbye, done) is Bucket.TERMINATING


def test_served_instance_is_released_only_when_the_pool_lets_it_go() -> None:
    assert bucket(ready("a", served_lease="l1")) is Bucket.RELEASED
    assert bucket(ready("a", served_lease="l1"), release=False) is Bucket.AVAILABLE
