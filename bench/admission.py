"""Admission cost through kube-apiserver: what our two webhooks add to each request.

Creates, updates and deletes of VirtualTargetClasses and ExporterSets are sent to a
loopback kube-apiserver (`harness.controlplane`) with the webhook configurations
registered (the webhook served by `harness.stack.running_webhook` and registered
from the rendered deploy manifests, as `make run` does) and with them removed (CRD schema
and CEL only). The two configurations alternate in rounds, every other round in reverse
order, so both see the same machine; the table gives each one's p50, p99 and sequential
throughput, and the p50 the webhooks add.

The client is one keep-alive HTTPS connection with the admin's token, so what is timed
is the apiserver's answer, not a client's handshakes. Beside the latencies, the same run
records where the added time goes:

- the webhook's own time per review (its `/metrics` latency histogram, sum over count),
  and the apiserver's time per webhook call (its
  `apiserver_admission_webhook_admission_duration_seconds`), so what lies between the two
  is transport: HTTP, TLS, JSON on both sides;
- the apiserver's connections to the webhook (its sockets to the webhook's port, read
  from /proc by inode), against the number of reviews sent over them;
- what a TCP + TLS handshake to the webhook costs (a fresh connection against a reused
  one, same client), and one create after the connection sat idle longer than the
  webhook keeps it open, against one after a short pause;
- an ExporterSet whose class is absent: the webhook's class lookup misses its watch cache
  and reads the apiserver live (the hit is the ordinary create, whose class is cached).

    VIRTUALTARGET_BIN_DIR=... python -m bench admission
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import re
import ssl
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench._stats import ms, percentile
from harness.controlplane import REPO_ROOT, ControlPlane, running_control_plane
from harness.stack import (
    WebhookServer,
    register_webhooks,
    running_webhook,
    unregister_webhooks,
)

ROUNDS = 10
PER_STEP = 100  # requests per step and round: 1,000 creates of each kind with the webhooks
NAMESPACE = "bench"
GROUP = "/apis/virtualtarget.jumpstarter.dev/v1alpha1"
CLASS = "qemu-x86"  # the class every set uses: in the webhook's cache from the start
ABSENT = "no-such-class"
# Steps in the order a batch runs them (a class may be deleted only once no set uses it).
STEPS: tuple[tuple[str, str], ...] = (
    ("VirtualTargetClass", "create"),
    ("ExporterSet", "create"),
    ("ExporterSet", "create, class absent"),
    ("ExporterSet", "create, template without labels"),
    ("VirtualTargetClass", "update"),
    ("ExporterSet", "update"),
    ("ExporterSet", "delete"),
    ("VirtualTargetClass", "delete"),
)
# Steps whose request CEL refuses without the webhook (the selector must match the
# template's labels, which the mutating webhook fills in): run with the webhooks only,
# against the ordinary create of the same kind without them.
WEBHOOK_ONLY = {("ExporterSet", "create, template without labels"): ("ExporterSet", "create")}
PLURAL = {"VirtualTargetClass": "virtualtargetclasses", "ExporterSet": "exportersets"}
TARGET_ADDED_MS = 2.0
HANDSHAKES = 40
IDLE_SAMPLES = 6
IDLE_SHORT, IDLE_LONG = 1.0, 6.0  # uvicorn closes an idle keep-alive connection after 5 s


class ApiSession:
    """One keep-alive HTTPS connection to kube-apiserver, authenticated as the admin."""

    def __init__(self, plane: ControlPlane) -> None:
        context = ssl.create_default_context(cafile=str(plane.ca_file))
        self.connection = http.client.HTTPSConnection("127.0.0.1", plane.port, context=context)
        self.token = plane.token

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, bytes, str]:
        """(status, body, Warning header) of one request."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "Content-Type": content_type,
        }
        data = json.dumps(body).encode() if body is not None else None
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        return response.status, response.read(), response.getheader("Warning") or ""


def _example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / name).read_text())
    loaded["metadata"]["namespace"] = NAMESPACE
    return loaded


CLASS_BODY = _example("virtualtargetclass-qemu.yaml")
SET_BODY = _example("exporterset-qemu.yaml")


def class_body(name: str) -> dict[str, Any]:
    body = copy.deepcopy(CLASS_BODY)
    body["metadata"]["name"] = name
    return body


def set_body(name: str, class_name: str = CLASS) -> dict[str, Any]:
    body = copy.deepcopy(SET_BODY)
    body["metadata"]["name"] = name
    body["spec"]["virtualTargetClassName"] = class_name
    labels = {"jumpstarter.dev/pool": name}
    body["spec"]["selector"] = {"matchLabels": labels}
    body["spec"]["template"]["metadata"]["labels"] = {**labels, "board": "qemu-x86"}
    return body


def _path(kind: str, name: str = "") -> str:
    path = f"{GROUP}/namespaces/{NAMESPACE}/{PLURAL[kind]}"
    return f"{path}/{name}" if name else path


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any = None
    content_type: str = "application/json"


def step_requests(kind: str, op: str, names: list[str]) -> list[Request]:
    """What one step sends, one request per name."""
    merge = "application/merge-patch+json"
    if op == "create":
        make = class_body if kind == "VirtualTargetClass" else set_body
        return [Request("POST", _path(kind), make(n)) for n in names]
    if op == "create, class absent":
        return [Request("POST", _path(kind), set_body(n, ABSENT)) for n in names]
    if op == "create, template without labels":  # the mutating webhook has work to do
        bodies = [set_body(n) for n in names]
        for body in bodies:
            del body["spec"]["template"]["metadata"]["labels"]
        return [Request("POST", _path(kind), body) for body in bodies]
    if op == "update":
        patch = (
            {"spec": {"parameters": {"resources": {"cpu": 4}}}}
            if kind == "VirtualTargetClass"
            else {"spec": {"maxReplicas": 9}}
        )
        return [Request("PATCH", _path(kind, n), patch, merge) for n in names]
    if op == "delete":
        return [Request("DELETE", _path(kind, n)) for n in names]
    raise ValueError(op)


# -- what the webhook and the apiserver report about themselves --------------------------

_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$")


def parse_metrics(text: str, family: str) -> dict[tuple[str, str], float]:
    """`family`'s `_sum` and `_count` samples of a Prometheus text exposition, added up per
    (suffix, labels as one sorted string minus `rejected`), e.g. ("sum", "name=...")."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or not match.group(1).startswith(family + "_"):
            continue
        suffix = match.group(1)[len(family) + 1 :]
        if suffix not in ("sum", "count"):
            continue
        labels = dict(pair.split("=", 1) for pair in match.group(2).split(",") if "=" in pair)
        labels.pop("rejected", None)
        key = ",".join(f"{k}={v.strip(chr(34))}" for k, v in sorted(labels.items()))
        totals[(suffix, key)] += float(match.group(3))
    return dict(totals)


WEBHOOK_FAMILY = "virtualtarget_webhook_latency_seconds"
APISERVER_FAMILY = "apiserver_admission_webhook_admission_duration_seconds"


def mean_per_call(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float], match: str
) -> tuple[float, float]:
    """(calls, mean seconds per call) between two scrapes, over the label sets that
    contain every comma-separated `k=v` of `match`."""
    wanted = match.split(",")
    count = total = 0.0
    for (suffix, key), value in after.items():
        if all(w in key.split(",") for w in wanted):
            delta = value - before.get((suffix, key), 0.0)
            if suffix == "count":
                count += delta
            else:
                total += delta
    return count, (total / count if count else 0.0)


class WebhookProbe:
    """Reads the webhook's /metrics and times handshakes, over its own connections."""

    def __init__(self, server: WebhookServer, token: str) -> None:
        self.headers = {"Authorization": f"Bearer {token}"}  # /metrics wants an authorized caller
        self.port = int(server.url.rsplit(":", 1)[1])
        self.context = ssl.create_default_context(cadata=server.certificates.ca_pem.decode())
        self.connection = self._connect()

    def _connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context)

    def _get(self, connection: http.client.HTTPSConnection, path: str) -> bytes:
        connection.request("GET", path, headers=self.headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"webhook {path}: {response.status} {body[:200]!r}")
        return body

    def metrics(self) -> dict[tuple[str, str], float]:
        try:
            text = self._get(self.connection, "/metrics")
        except (http.client.HTTPException, ConnectionError):  # closed while idle: once more
            self.connection.close()
            self.connection = self._connect()
            text = self._get(self.connection, "/metrics")
        return parse_metrics(text.decode(), WEBHOOK_FAMILY)

    def handshake_cost(self, samples: int) -> tuple[float, float]:
        """(median seconds of a /healthz on a fresh connection, on a reused one),
        interleaved."""
        fresh, reused = [], []
        kept = self._connect()
        self._get(kept, "/healthz")
        for _ in range(samples):
            started = time.perf_counter()
            connection = self._connect()
            self._get(connection, "/healthz")
            fresh.append(time.perf_counter() - started)
            connection.close()
            started = time.perf_counter()
            self._get(kept, "/healthz")
            reused.append(time.perf_counter() - started)
        kept.close()
        return statistics.median(fresh), statistics.median(reused)


def apiserver_connections(apiserver_pid: int, port: int) -> set[int]:
    """Local ports of the apiserver's established TCP connections to `port` on loopback:
    /proc/net/tcp rows whose socket inode is one of the apiserver's descriptors."""
    inodes = set()
    fd_dir = Path(f"/proc/{apiserver_pid}/fd")
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        if state == "01" and int(remote.split(":")[1], 16) == port and inode in inodes:
            found.add(int(local.split(":")[1], 16))
    return found


# -- the run ----------------------------------------------------------------------------


@dataclass
class Results:
    latencies: dict[tuple[bool, str, str], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    per_round_p50: dict[tuple[bool, str, str], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    seconds: dict[tuple[bool, str, str], float] = field(default_factory=lambda: defaultdict(float))
    failures: dict[tuple[bool, str, str], int] = field(default_factory=lambda: defaultdict(int))
    errors: list[str] = field(default_factory=list)
    # (kind, op) -> [(reviews, webhook mean s, apiserver calls, apiserver mean s)] per round
    breakdown: dict[tuple[str, str], list[tuple[float, float, float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    connections_per_batch: list[int] = field(default_factory=list)
    reviews_per_batch: list[float] = field(default_factory=list)
    new_connections_per_batch: list[int] = field(default_factory=list)


class Bench:
    def __init__(self, plane: ControlPlane, server: WebhookServer) -> None:
        self.plane, self.server = plane, server
        self.session = ApiSession(plane)
        self.probe = WebhookProbe(server, plane.token)
        self.apiserver_pid = plane.processes[-1].pid
        self.registered = True
        self.results = Results()
        self.seen_ports: set[int] = set()

    def _send(self, request: Request) -> tuple[int, bytes, str, float]:
        started = time.perf_counter()
        status, body, warning = self.session.call(
            request.method, request.path, request.body, request.content_type
        )
        return status, body, warning, time.perf_counter() - started

    def configure(self, webhooks: bool) -> None:
        if webhooks and not self.registered:
            register_webhooks(self.plane, self.server)
        elif not webhooks and self.registered:
            unregister_webhooks(self.plane)
            self._wait_uncalled()
        self.registered = webhooks

    def _wait_uncalled(self) -> None:
        """Removal reaches the admission chain asynchronously: wait until a dry-run
        create of a set with an absent class comes back without the webhook's warning."""
        probe = Request("POST", _path("ExporterSet") + "?dryRun=All", set_body("probe", ABSENT))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, _, warning, _ = self._send(probe)
            if status == 201 and ABSENT not in warning:
                return
            time.sleep(0.1)
        raise RuntimeError("the webhooks were still called 30 s after their removal")

    def _scrape(self) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
        _, text, _ = self.session.call("GET", "/metrics")
        return self.probe.metrics(), parse_metrics(text.decode(), APISERVER_FAMILY)

    def batch(self, round_index: int, webhooks: bool) -> None:
        tag = f"r{round_index}-{'w' if webhooks else 'n'}"
        # Sets of the variant creates get names of their own, removed untimed at the end.
        names = {
            op: [f"{tag}-{index}-{i}" if ", " in op else f"{tag}-{i}" for i in range(PER_STEP)]
            for index, (_, op) in enumerate(STEPS)
        }
        ports: set[int] = set()
        reviews = 0.0
        for kind, op in STEPS:
            if not webhooks and (kind, op) in WEBHOOK_ONLY:
                continue
            requests = step_requests(kind, op, names[op] if ", " in op else names["create"])
            before = self._scrape() if webhooks else None
            times = []
            for index, request in enumerate(requests):
                status, body, _, seconds = self._send(request)
                times.append(seconds)
                if not 200 <= status < 300:
                    self.results.failures[(webhooks, kind, op)] += 1
                    if len(self.results.errors) < 5:
                        self.results.errors.append(f"{kind} {op}: {status} {body[:300]!r}")
                if webhooks and index % 25 == 0:
                    ports |= apiserver_connections(self.apiserver_pid, self.probe.port)
            key = (webhooks, kind, op)
            self.results.latencies[key] += times
            self.results.per_round_p50[key].append(percentile(times, 50))
            self.results.seconds[key] += sum(times)
            if before is not None:
                webhook_after, apiserver_after = self._scrape()
                verb = "DELETE" if op == "delete" else "UPDATE" if op == "update" else "CREATE"
                count, webhook_mean = mean_per_call(
                    before[0], webhook_after, f"kind={kind},operation={verb}"
                )
                calls, apiserver_mean = mean_per_call(
                    before[1], apiserver_after, f"operation={verb}"
                )
                reviews += count
                self.results.breakdown[(kind, op)].append(
                    (count / len(requests), webhook_mean, calls / len(requests), apiserver_mean)
                )
        for op, variant in names.items():
            for name in variant if ", " in op else ():
                self._send(Request("DELETE", _path("ExporterSet", name)))
        if webhooks:
            self.results.connections_per_batch.append(len(ports))
            self.results.new_connections_per_batch.append(len(ports - self.seen_ports))
            self.results.reviews_per_batch.append(reviews)
            self.seen_ports |= ports

    def idle_creates(self) -> tuple[dict[float, list[float]], dict[float, int]]:
        """One create after the webhook connection sat idle `IDLE_LONG` s (longer than
        uvicorn's default keep-alive), against one after `IDLE_SHORT` s; and per pause, how
        many of those creates the apiserver sent over a connection it had not used before."""
        times: dict[float, list[float]] = {IDLE_SHORT: [], IDLE_LONG: []}
        fresh = dict.fromkeys(times, 0)
        for index in range(IDLE_SAMPLES):
            for idle in (IDLE_SHORT, IDLE_LONG) if index % 2 == 0 else (IDLE_LONG, IDLE_SHORT):
                time.sleep(idle)
                name = f"idle-{index}-{int(idle)}"
                status, body, _, seconds = self._send(
                    Request("POST", _path("ExporterSet"), set_body(name))
                )
                if status != 201:
                    raise RuntimeError(f"idle create: {status} {body[:300]!r}")
                times[idle].append(seconds)
                ports = apiserver_connections(self.apiserver_pid, self.probe.port)
                fresh[idle] += bool(ports - self.seen_ports)
                self.seen_ports |= ports
                self._send(Request("DELETE", _path("ExporterSet", name)))
        return times, fresh


Idle = tuple[dict[float, list[float]], dict[float, int]]


def run() -> tuple[Results, tuple[float, float], Idle, str]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-admission-") as tmp,
        running_control_plane() as plane,
        running_webhook(plane, Path(tmp)) as server,
    ):
        plane.kubectl("create", "namespace", NAMESPACE)
        register_webhooks(plane, server)
        bench = Bench(plane, server)
        status, body, _, _ = bench._send(Request("POST", _path("VirtualTargetClass"), CLASS_BODY))
        if status != 201:
            raise RuntimeError(f"the shared class: {status} {body[:300]!r}")
        time.sleep(1)  # the class reaches the webhook's watch cache
        # Warm-up: the first requests of each kind pay for connections and caches.
        bench.batch(-1, True)
        bench.results = Results()
        for index in range(ROUNDS):
            order = (True, False) if index % 2 == 0 else (False, True)
            for webhooks in order:
                bench.configure(webhooks)
                bench.batch(index, webhooks)
        bench.configure(True)
        handshake = bench.probe.handshake_cost(HANDSHAKES)
        idle = bench.idle_creates()
        load = Path("/proc/loadavg").read_text().split()[:3]
        return bench.results, handshake, idle, " ".join(load)


def main() -> str:
    started = datetime.now(UTC)
    results, handshake, idle, load = run()
    return report(results, handshake, idle, load, started)


def report(
    results: Results,
    handshake: tuple[float, float],
    idle: Idle,
    load: str,
    started: datetime,
) -> str:
    lines = [
        "## admission through kube-apiserver (`python -m bench admission`)",
        "",
        f"Started {started:%Y-%m-%d %H:%M} UTC; load average at the end {load}. "
        f"{ROUNDS} rounds x {PER_STEP} requests per step and configuration, one keep-alive "
        "client connection, the two configurations alternating within each round. "
        "Times in ms.",
        "",
    ]
    table, verdicts = _latencies(results)
    lines += [*table, "", *_verdicts(results, verdicts), "", *_breakdown(results)]
    lines += ["", *_connections(results, handshake, idle)]
    return "\n".join(lines)


def _latencies(results: Results) -> tuple[list[str], list[tuple[str, str, float]]]:
    """The table of added latency per step, and each step's added p50 (median of rounds)."""
    lines = [
        "| kind | operation | p50 without | p50 with | added p50 | added p50, median of "
        "rounds | p99 without | p99 with | req/s without | req/s with | failures with "
        "| failures without |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for kind, op in STEPS:
        w, n = (True, kind, op), (False, *WEBHOOK_ONLY.get((kind, op), (kind, op)))
        with_t, without_t = results.latencies[w], results.latencies[n]
        added = percentile(with_t, 50) - percentile(without_t, 50)
        per_round = statistics.median(
            a - b for a, b in zip(results.per_round_p50[w], results.per_round_p50[n], strict=True)
        )
        lines.append(
            f"| {kind} | {op} | {ms(percentile(without_t, 50))} | {ms(percentile(with_t, 50))} "
            f"| {ms(added)} | {ms(per_round)} | {ms(percentile(without_t, 99))} "
            f"| {ms(percentile(with_t, 99))} | {len(without_t) / results.seconds[n]:.0f} "
            f"| {len(with_t) / results.seconds[w]:.0f} | {results.failures[w]} "
            f"| {results.failures[n]} |"
        )
        verdicts.append((kind, op, per_round))
    return lines, verdicts


def _verdicts(results: Results, verdicts: list[tuple[str, str, float]]) -> list[str]:
    """Creates and their failures, and the added time against the target."""
    creates = sum(len(results.latencies[(True, k, o)]) for k, o in STEPS if o.startswith("create"))
    create_failures = sum(
        results.failures[(True, k, o)] for k, o in STEPS if o.startswith("create")
    )
    # The ordinary requests, where the mutating webhook is skipped when it has nothing to
    # add; and the create that makes the apiserver call both webhooks.
    ordinary = [v for v in verdicts if ", " not in v[1]]
    worst = max(ordinary, key=lambda v: v[2])
    both = next(v for v in verdicts if v[1] == "create, template without labels")

    def verdict(value: float) -> str:
        return "meets" if value <= TARGET_ADDED_MS / 1000 else "MISSES"

    return [
        f"Creates with the webhooks: {creates}, failures: {create_failures}. "
        f"Largest added p50 (median of rounds) of the ordinary requests: {ms(worst[2])} ms "
        f"({worst[0]} {worst[1]}): {verdict(worst[2])} the target of at most "
        f"{TARGET_ADDED_MS:.0f} ms. Both webhooks called (a template without labels): "
        f"{ms(both[2])} ms, {verdict(both[2])} it.",
        *(f"- error: {e}" for e in results.errors),
    ]


def _breakdown(results: Results) -> list[str]:
    """Where the added time goes, from both sides' metrics."""
    lines = [
        "Where the added time goes (with the webhooks; means per request from both sides' "
        "metrics, medians over rounds):",
        "",
        "| kind | operation | reviews per request | webhook in-process per review | apiserver "
        "calls per request | apiserver time per call | transport per call |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (kind, op), rows in results.breakdown.items():
        reviews, inside, calls, outside = (statistics.median(r[i] for r in rows) for i in range(4))
        lines.append(
            f"| {kind} | {op} | {reviews:.1f} | {ms(inside)} | {calls:.1f} | {ms(outside)} "
            f"| {ms(outside - inside) if calls else '-'} |"
        )
    return lines


def _connections(results: Results, handshake: tuple[float, float], idle: Idle) -> list[str]:
    """The apiserver's connections to the webhook, a handshake's cost, an idle create."""
    fresh, reused = handshake
    times, fresh_connections = idle
    short, long = (statistics.median(times[i]) for i in (IDLE_SHORT, IDLE_LONG))
    return [
        "Connections: the apiserver's connections to the webhook seen per round "
        f"(sampled every 25 requests): {results.connections_per_batch}, of which new in "
        f"that round: {results.new_connections_per_batch}, for "
        f"{[int(r) for r in results.reviews_per_batch]} reviews.",
        "",
        f"Handshake: a /healthz on a fresh TCP + TLS connection to the webhook takes "
        f"{ms(fresh)} ms against {ms(reused)} ms on a reused one (Python client, median of "
        f"{HANDSHAKES}, interleaved): a handshake costs about {ms(fresh - reused)} ms.",
        "",
        f"Idle: an ExporterSet create {IDLE_LONG:.0f} s after the previous request takes "
        f"{ms(long)} ms against {ms(short)} ms {IDLE_SHORT:.0f} s after it (medians of "
        f"{IDLE_SAMPLES}, interleaved); the apiserver opened a new connection to the "
        f"webhook for {fresh_connections[IDLE_LONG]} of the {IDLE_SAMPLES} after "
        f"{IDLE_LONG:.0f} s and {fresh_connections[IDLE_SHORT]} of those after "
        f"{IDLE_SHORT:.0f} s.",
    ]


if __name__ == "__main__":
    print(main())
