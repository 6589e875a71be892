"""The watch cache's live reads keep to the request's budget, whatever the apiserver does.

Real sockets on loopback: one port that accepts connections and never answers, one
where nothing listens. Admission itself arms no timer, so these bounds are the only ones.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client
from urllib3.exceptions import MaxRetryError, ReadTimeoutError

from tests.unit.test_webhook_crossobject import _kubevirt_class, run
from tests.unit.test_webhook_support import a_class, a_set, review, schema_source
from webhook.admission import Admission
from webhook.cache import ClusterCache, _live
from webhook.clusterview import ClusterUnavailable


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose kernel completes the TCP handshake; nobody reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def admission_against(port: int) -> Admission:
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = 0
    return Admission(schema_source, ClusterCache(client.ApiClient(configuration)))


def test_a_silent_apiserver_is_cut_off_at_the_budget(silent_port: int) -> None:
    outcome = run(admission_against(silent_port), review(a_set()), budget=0.2)
    assert (outcome.code, outcome.reason) == (503, "ServiceUnavailable")
    assert outcome.message == (
        "cannot check against the cluster (apiserver did not answer within 0.2s); retry the request"
    )


def test_the_clients_own_read_timeout_reads_as_the_budget_run_out() -> None:
    # The client's read timeout is the same budget; on a loaded machine it fires first.
    def silent() -> None:
        raise MaxRetryError(None, "/apis", ReadTimeoutError(None, "/apis", "read timed out"))

    with pytest.raises(ClusterUnavailable, match=r"^apiserver did not answer within 0\.2s$"):
        asyncio.run(_live(silent, 0.2, not_found=None))


def test_a_refused_connection_denies_with_a_retryable_message(closed_port: int) -> None:
    outcome = run(admission_against(closed_port), review(a_set()), budget=0.5)
    assert outcome.code == 503
    assert "apiserver unreachable" in outcome.message and "retry the request" in outcome.message


def test_deleting_a_class_before_the_set_cache_synced_reads_live_and_is_bounded(
    silent_port: int,
) -> None:
    outcome = run(
        admission_against(silent_port), review(None, old=a_class(), operation="DELETE"), 0.2
    )
    assert outcome.code == 503 and "within 0.2s" in outcome.message


def test_single_object_errors_are_kept_when_the_apiserver_is_silent(silent_port: int) -> None:
    outcome = run(admission_against(silent_port), review(a_set(minReplicas=-1)), budget=0.2)
    assert [e.field for e in outcome.errors] == ["spec.minReplicas"]
    assert outcome.warnings == ["cross-object checks skipped: apiserver did not answer within 0.2s"]


def _labelled_set(name: str, pool: str, created: str, deleting: bool = False) -> dict[str, object]:
    exporter_set = a_set()
    labels = {"jumpstarter.dev/pool": pool}
    exporter_set["spec"]["selector"] = {"matchLabels": labels}
    exporter_set["spec"]["template"] = {"metadata": {"labels": dict(labels)}}
    exporter_set["metadata"].update(name=name, creationTimestamp=created)
    if deleting:
        exporter_set["metadata"]["deletionTimestamp"] = created
    return exporter_set


def test_a_set_review_is_compared_with_the_sets_it_may_overlap_as_the_watch_keeps_them() -> None:
    """The set cache keeps the claim index up to date event by event: a review's overlap
    warnings name the same sets as a scan of the namespace, and only those."""
    view = admission_against(1).view
    assert isinstance(view, ClusterCache)
    view.caches["VirtualTargetClass"].apply("ADDED", a_class())
    cache = view.caches["ExporterSet"]
    cache.synced.set()
    old = _labelled_set("pool-old", "poolA", "2026-01-01T00:00:00Z")
    cache.apply("ADDED", old)
    cache.apply("ADDED", _labelled_set("pool-c", "poolC", "2026-01-01T00:00:00Z"))
    cache.apply("ADDED", _labelled_set("pool-going", "poolA", "2026-01-01T00:00:00Z", True))
    newer = _labelled_set("pool-new", "poolA", "2026-01-02T00:00:00Z")
    expected = [
        'selector overlaps ExporterSet "pool-old": a pending Lease both match is counted by '
        'the older set, "pool-old"'
    ]
    assert run(Admission(schema_source, view), review(newer)).warnings == expected
    moved = _labelled_set("pool-old", "poolB", "2026-01-01T00:00:00Z")
    cache.apply("MODIFIED", moved)
    assert run(Admission(schema_source, view), review(newer)).warnings == []
    cache.apply("MODIFIED", old)
    cache.apply("DELETED", old)
    assert run(Admission(schema_source, view), review(newer)).warnings == []


class _Recorded(BaseHTTPRequestHandler):
    """An apiserver of no objects: a list is empty, a read by name is 404. Every path
    asked for is kept in `server.paths`."""

    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        # /apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>]: 7 segments list
        named = len(self.path.split("?")[0].strip("/").split("/")) > 6
        status, body = (404, {"kind": "Status", "code": 404}) if named else (200, {"items": []})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recording_port() -> Iterator[tuple[int, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorded)
    server.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], server.paths  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def test_admitting_a_kubevirt_class_and_its_set_reads_no_secret(
    recording_port: tuple[int, list[str]],
) -> None:
    """The server's cache, its caches not yet synced (every check reads live): what a
    KubeVirt class and a set of it ask the apiserver for is classes and sets, never the
    class's credentials Secret (its RBAC grants none: tests/unit/test_deploy_rbac.py)."""
    port, paths = recording_port
    admission = admission_against(port)
    klass = _kubevirt_class()
    assert run(admission, review(klass)).allowed
    exporter_set = a_set(parameters={"namespace": "vms"})
    run(admission, review(exporter_set))
    assert paths, "the checks read nothing live"
    assert all(p.startswith("/apis/virtualtarget.jumpstarter.dev/") for p in paths), paths
