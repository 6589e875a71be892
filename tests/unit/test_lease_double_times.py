"""The times the lease double's CreateLease books, as Jumpstarter 0.9.0's
`LeaseFromProtobuf` does (`controller/api/v1alpha1/lease_helpers.go`,
`ReconcileLeaseTimeFields`), and reads back as `Lease.ToProtobuf` does."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import duration_pb2, timestamp_pb2
from jumpstarter_protocol.jumpstarter.client.v1 import client_pb2

from tests.lease_double import lease_message, requested_times

BEGIN, END = datetime(2026, 1, 2, 3, 0, tzinfo=UTC), datetime(2026, 1, 2, 4, 30, tzinfo=UTC)


def _stamp(moment: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def _asked(**fields: object) -> client_pb2.Lease:
    return client_pb2.Lease(selector="board=b", **fields)


def test_duration_alone_books_no_times() -> None:
    asked = _asked(duration=duration_pb2.Duration(seconds=600))
    assert requested_times(asked) == {"duration": "10m0s"}


def test_begin_and_duration_book_the_begin() -> None:
    asked = _asked(begin_time=_stamp(BEGIN), duration=duration_pb2.Duration(seconds=600))
    assert requested_times(asked) == {"duration": "10m0s", "beginTime": "2026-01-02T03:00:00Z"}


def test_begin_and_end_give_the_duration() -> None:
    asked = _asked(begin_time=_stamp(BEGIN), end_time=_stamp(END))
    assert requested_times(asked) == {
        "duration": "1h30m0s",
        "beginTime": "2026-01-02T03:00:00Z",
        "endTime": "2026-01-02T04:30:00Z",
    }


def test_end_and_duration_give_the_begin() -> None:
    asked = _asked(end_time=_stamp(END), duration=duration_pb2.Duration(seconds=5400))
    assert requested_times(asked)["beginTime"] == "2026-01-02T03:00:00Z"


def test_therequested_times_are_read_back() -> None:
    lease = {
        "metadata": {"name": "l", "namespace": "ns"},
        "spec": {"clientRef": {"name": "c"}, "beginTime": "2026-01-02T03:00:00Z",
                 "endTime": "2026-01-02T04:30:00Z", "duration": "1h30m0s"},
    }  # fmt: skip
    message = lease_message(lease)
    assert message.begin_time.ToDatetime(UTC) == BEGIN
    assert message.end_time.ToDatetime(UTC) == END
    assert not message.HasField("effective_begin_time")
