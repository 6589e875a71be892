"""Refill latency: from a Lease taking the last warm instance of a pool to its replacement.

The warm buffer exists so that a lease never waits for a boot: when a lease takes the
last warm instance, the replacement must be on its way at once. This benchmark plays
Jumpstarter on a loopback kube-apiserver (`harness.controlplane`), as the
end-to-end tests do: it creates a Lease (of Jumpstarter's release Lease CRD),
assigns it (the Lease's `status.exporterRef`, then the Exporter's `status.leaseRef`),
issues credentials as Jumpstarter's controller would (`CredentialStandIn.issue`, driven
by a watch rather than its half-second sweep, so its own pace is not measured) and marks
booted instances online. The webhook is registered as `make run` does.

Every pool keeps `WARM` instances warm; a round leases all of them back to back (a burst,
as a CI job taking several boards), so the last lease of the burst takes the last warm
instance. Measured for that lease, from the bench's own watches with local receive
times (creationTimestamp has a 1 s resolution):

- t0: the Lease's arrival (its ADDED event; Jumpstarter assigns it at once, and the
  reconciler may start on the pending Lease), and its assignment (the event carrying
  `status.exporterRef`);
- the replacement Exporter's ADDED event (the last new Exporter of the round's pool);
- its Pod's ADDED event, once the stand-in has issued its credentials (whose event is
  recorded too, to split Jumpstarter's part from ours).

`virtualtarget reconcile` runs as a process on namespaces of its own. Scenarios: one
pool, rounds one after another; and 100 pools in one namespace, every pool's burst sent at
once. Against Jumpstarter main's own exporter-set controller, with the 0.9.0 release
assigning the Leases: `python -m bench versus`.

    VIRTUALTARGET_BIN_DIR=... python -m bench refill
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._stats import percentile
from bench.webhook import _cpu_seconds as process_cpu_seconds
from harness.controlplane import REPO_ROOT, ControlPlane, running_control_plane
from harness.stack import (
    ChildProcess,
    reconciler_args,
    register_webhooks,
    running_webhook,
    served_url,
)
from harness.standin import CredentialStandIn
from pool.model.access import EXPORTERS, EXPORTERSETS, JUMPSTARTER_LEASES, PODS
from pool.model.keys import SET_LABEL
from reconciler.runtime.cache import Informer, ObjKey, key_of
from reconciler.runtime.kube import Kube
from scrape.serving import SERVING_METRICS
from tests.e2e.objects import install_lease_crd
from tests.e2e.objects import lease as pending_lease

WARM = 2  # minAvailableReplicas of every pool
SINGLE_ROUNDS = 100  # one pool: rounds per reconciler (one sample each)
MANY_POOLS = 100
MANY_WAVES = 2  # 100 pools: waves per reconciler (one sample per pool each)
LEASE_WRITERS = 8  # threads sending the 100 pools' bursts at once
STANDIN_WORKERS = 4
EXTRA_ARGS: tuple[str, ...] = ()  # more arguments for both reconcilers
TARGET_P95_S = 1.0
WAIT_S = 120.0
RECONCILERS = {"ours": "virtualtarget.cli"}
GROUP, VERSION = "jumpstarter.dev", "v1alpha1"
NOW = "2026-01-01T00:00:00Z"
CLASS = {"provisioner": "qemu.jumpstarter.dev", "parameters": {"resources": {"cpu": 1}}}


def ns_of(reconciler: str, pools: int) -> str:
    return f"refill-{reconciler}-{pools}"


# -- what the bench sees: local receive times of watch events ---------------------------


@dataclass
class Seen:
    exporter: dict[ObjKey, float] = field(default_factory=dict)
    credential: dict[ObjKey, float] = field(default_factory=dict)
    pod: dict[ObjKey, float] = field(default_factory=dict)
    lease: dict[ObjKey, float] = field(default_factory=dict)
    assigned: dict[ObjKey, float] = field(default_factory=dict)
    # set -> its Exporters in the order their ADDED events arrived
    members: dict[ObjKey, list[str]] = field(default_factory=lambda: defaultdict(list))
    # set -> (status.availableReplicas, when that status was received)
    available: dict[ObjKey, tuple[int, float]] = field(default_factory=dict)


class Recorder:
    """The bench's own list-and-watch caches (`reconciler.runtime.cache.Informer`), whose handlers
    stamp each first sighting with `time.monotonic()` as the event is received."""

    def __init__(self, kube: Kube) -> None:
        self.seen = Seen()
        self.changed = threading.Condition()
        self.informers = {r: Informer(kube, r) for r in (EXPORTERS, PODS, JUMPSTARTER_LEASES)}
        self.informers[EXPORTERSETS] = Informer(kube, EXPORTERSETS)
        self.informers[EXPORTERS].add_handler(self._exporter)
        self.informers[PODS].add_handler(self._stamp(lambda: self.seen.pod))
        self.informers[JUMPSTARTER_LEASES].add_handler(self._lease)
        self.informers[EXPORTERSETS].add_handler(self._set)
        self.on_exporter: list[Callable[[str, dict[str, Any]], None]] = []

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _stamp(self, table: Callable[[], dict[ObjKey, float]]) -> Any:
        def handler(kind: str, new: dict[str, Any], _old: dict[str, Any] | None) -> None:
            if kind == "ADDED":
                table().setdefault(key_of(new), time.monotonic())
                self._notify()

        return handler

    def _exporter(self, kind: str, new: dict[str, Any], _old: dict[str, Any] | None) -> None:
        now, key = time.monotonic(), key_of(new)
        if kind == "ADDED":
            self.seen.exporter.setdefault(key, now)
            pool = (new["metadata"].get("labels") or {}).get(SET_LABEL)
            if pool:
                self.seen.members[(key[0], pool)].append(key[1])
        if ((new.get("status") or {}).get("credential") or {}).get("name"):
            self.seen.credential.setdefault(key, now)
        for callback in self.on_exporter:
            callback(kind, new)
        self._notify()

    def _lease(self, kind: str, new: dict[str, Any], _old: dict[str, Any] | None) -> None:
        now, key = time.monotonic(), key_of(new)
        if kind == "ADDED":
            self.seen.lease.setdefault(key, now)
        if ((new.get("status") or {}).get("exporterRef") or {}).get("name"):
            self.seen.assigned.setdefault(key, now)
        self._notify()

    def _set(self, kind: str, new: dict[str, Any], _old: dict[str, Any] | None) -> None:
        available = (new.get("status") or {}).get("availableReplicas", 0)
        self.seen.available[key_of(new)] = (available, time.monotonic())
        self._notify()

    def start(self, stop: threading.Event) -> None:
        for informer in self.informers.values():
            threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
        for informer in self.informers.values():
            informer.synced.wait(30)

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"refill: timed out waiting for {what}")
                self.changed.wait(min(left, 0.5))

    def pool_exporters(self, namespace: str, pool: str) -> list[str]:
        """The pool's Exporters in the order the bench saw them created."""
        return list(self.seen.members.get((namespace, pool), ()))


# -- playing Jumpstarter ----------------------------------------------------------------


class Jumpstarter:
    """Leases, assignment, credentials and booted instances, as Jumpstarter would make them."""

    def __init__(self, plane: ControlPlane, recorder: Recorder) -> None:
        self.plane, self.recorder = plane, recorder
        self.local = threading.local()
        self.pending: queue.Queue[ObjKey] = queue.Queue()
        recorder.on_exporter.append(self._needs_credentials)

    def api(self) -> Any:
        """A CustomObjectsApi per thread (one connection pool each)."""
        if not hasattr(self.local, "api"):
            from kubernetes import client

            self.local.api = client.CustomObjectsApi(self.plane.api_client())
        return self.local.api

    def _needs_credentials(self, kind: str, exporter: dict[str, Any]) -> None:
        meta, status = exporter["metadata"], exporter.get("status") or {}
        issued = (status.get("credential") or {}).get("name")
        if kind == "ADDED" and not meta.get("deletionTimestamp") and not issued:
            self.pending.put(key_of(exporter))

    def issue_credentials(self, stop: threading.Event) -> None:
        """A stand-in worker: credentials for each new Exporter as its event arrives."""
        standin = CredentialStandIn(self.plane.api_client())
        while not stop.is_set():
            try:
                namespace, name = self.pending.get(timeout=0.2)
            except queue.Empty:
                continue
            standin.issue(namespace, name)

    def lease(self, namespace: str, pool: str, lease: str, exporter: str) -> None:
        """Create the Lease, assign it the Exporter, and point the Exporter back at it."""
        api = self.api()
        body = pending_lease(lease, namespace, {"board": pool})
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, "leases", body)
        api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "leases",
            lease,
            {"status": {"exporterRef": {"name": exporter}, "ended": False}},
        )
        status = {"status": {"leaseRef": {"name": lease}, "exporterStatus": "LeaseReady"}}
        api.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "exporters", exporter, status
        )

    def boot(self, namespace: str, exporter: str) -> None:
        """The instance registered and online, as its exporter process would report."""
        conditions = [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": NOW}
            for t in ("Registered", "Online")
        ]
        body = {"status": {"conditions": conditions, "exporterStatus": "Available"}}
        self.api().patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "exporters", exporter, body
        )


# -- the run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """Seconds from the last lease of a burst to its replacement Exporter and Pod."""

    exporter_from_arrival: float
    exporter_from_assignment: float
    pod_from_arrival: float
    pod_from_credentials: float  # our part of the Pod's wait: credentials issued -> Pod


class MetricsProbe:
    """A reconciler's /metrics (HTTPS, its self-signed certificate), read as the admin."""

    def __init__(self, url: str, token: str, pid: int) -> None:
        self.url, self.token, self.pid = url, token, pid

    def totals(self) -> dict[str, float]:
        """Every sample's value, added up per sample name over its label sets."""
        host, port = self.url.removeprefix("https://").rsplit(":", 1)
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
        try:
            headers = {"Authorization": f"Bearer {self.token}"}
            connection.request("GET", "/metrics", headers=headers)
            text = connection.getresponse().read().decode()
        finally:
            connection.close()
        return sample_totals(text)


def sample_totals(text: str) -> dict[str, float]:
    """A Prometheus exposition's values added up per sample name."""
    totals: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split("{", 1)[0].split(" ", 1)[0], line.rsplit(" ", 1)[1]
            totals[name] += float(value)
    return dict(totals)


# What a reconciler's own metrics say about its passes: (label, total, count for a mean).
PASS_METRICS = (
    ("passes", "controller_runtime_reconcile_total", ""),
    ("queue adds", "workqueue_adds_total", ""),
    (
        "mean queue wait ms",
        "workqueue_queue_duration_seconds_sum",
        "workqueue_queue_duration_seconds_count",
    ),
    (
        "mean pass ms",
        "workqueue_work_duration_seconds_sum",
        "workqueue_work_duration_seconds_count",
    ),
    ("API writes", "virtualtarget_reconciler_api_writes_total", ""),
)


def pass_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """PASS_METRICS between two scrapes: differences, and means in ms where counted."""
    figures = {}
    for label, total, count in PASS_METRICS:
        delta = after.get(total, 0.0) - before.get(total, 0.0)
        if count:
            calls = after.get(count, 0.0) - before.get(count, 0.0)
            delta = delta / calls * 1000 if calls else 0.0
        figures[label] = delta
    return figures


@contextlib.contextmanager
def running(
    name: str, module: str, plane: ControlPlane, namespace: str, workdir: Path
) -> Iterator[MetricsProbe]:
    args = reconciler_args(plane.kubeconfig)
    log = (workdir / f"{name}-{namespace}.log").open("wb")
    popen = subprocess.Popen(
        [
            sys.executable,
            "-m",
            module,
            *args,
            f"--namespace={namespace}",
            "--no-leader-election",
            *EXTRA_ARGS,
        ],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    process = ChildProcess(name, popen, log)
    try:
        metrics_url = served_url(Path(log.name), SERVING_METRICS, "https", popen)
        yield MetricsProbe(metrics_url, plane.token, popen.pid)
        process.check_alive()
    finally:
        process.stop()


class Refill:
    def __init__(self, plane: ControlPlane, recorder: Recorder, jumpstarter: Jumpstarter) -> None:
        self.plane, self.recorder, self.js = plane, recorder, jumpstarter
        # per pool (namespace, set): its booted, unleased instances, and its leased ones
        self.warm: dict[ObjKey, list[str]] = defaultdict(list)
        self.leased: dict[ObjKey, set[str]] = defaultdict(set)
        self.sending: dict[str, list[float]] = defaultdict(list)  # s to send a wave's Leases

    def make_pools(self, namespace: str, pools: int) -> list[str]:
        names = [f"pool{i}" for i in range(pools)]
        items: list[dict[str, Any]] = [
            {
                "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
                "kind": "VirtualTargetClass",
                "metadata": {"name": "qemu", "namespace": namespace},
                "spec": CLASS,
            }
        ]
        for pool in names:
            labels = {"board": pool}
            items.append(
                {
                    "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
                    "kind": "ExporterSet",
                    "metadata": {"name": pool, "namespace": namespace},
                    "spec": {
                        "virtualTargetClassName": "qemu",
                        "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels}},
                        "minAvailableReplicas": WARM,
                        "maxReplicas": 0,  # no ceiling: leased instances pile up
                        "scaleDownCooldown": "1h",
                    },
                }
            )
        self.plane.kubectl("create", "namespace", namespace)
        document = {"apiVersion": "v1", "kind": "List", "items": items}
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(document))
        return names

    def _new(self, namespace: str, pool: str, before: set[str]) -> list[str]:
        """The pool's Exporters created since `before`, oldest first."""
        return [n for n in self.recorder.pool_exporters(namespace, pool) if n not in before]

    def _with_pods(self, namespace: str, names: list[str]) -> bool:
        return len(names) >= WARM and all((namespace, n) in self.recorder.seen.pod for n in names)

    def settle(self, namespace: str, pools: list[str]) -> None:
        """Boot each pool's unleased instances once their Pods exist, and wait until every
        pool reports WARM available in a status written after that."""
        for pool in pools:
            key = (namespace, pool)
            self.recorder.wait(
                f"{namespace}/{pool}: {WARM} instances with Pods",
                lambda key=key: self._with_pods(key[0], self._new(*key, self.leased[key])),
            )
        booted = []
        for pool in pools:
            key = (namespace, pool)
            fresh = [n for n in self._new(*key, self.leased[key]) if n not in self.warm[key]]
            self.warm[key] += fresh
            booted += [(namespace, name) for name in fresh]
        # A status received from here on that counts WARM available has seen the boots:
        # since the burst, the pool had fewer.
        since = time.monotonic()
        with ThreadPoolExecutor(LEASE_WRITERS) as writers:
            list(writers.map(lambda k: self.js.boot(*k), booted))
        seen = self.recorder.seen
        for pool in pools:
            self.recorder.wait(
                f"{namespace}/{pool}: {WARM} available",
                lambda key=(namespace, pool): seen.available.get(key, (0, 0.0))[0] >= WARM
                and seen.available[key][1] > since,
            )

    def burst(self, namespace: str, pool: str, tag: str) -> tuple[str, set[str]]:
        """Lease every warm instance of the pool back to back (WARM, or more if the pool
        ever made a surplus); the last Lease's name and the pool's Exporters before."""
        key = (namespace, pool)
        before = set(self.recorder.pool_exporters(namespace, pool))
        lease = ""
        for index in range(len(self.warm[key])):
            exporter = self.warm[key].pop(0)
            self.leased[key].add(exporter)
            lease = f"{pool}-{tag}-{index}"
            self.js.lease(namespace, pool, lease, exporter)
        return lease, before

    def sample(self, namespace: str, pool: str, lease: str, before: set[str]) -> Sample:
        self.recorder.wait(
            f"{namespace}/{pool}: {WARM} replacements with Pods",
            lambda: self._with_pods(namespace, self._new(namespace, pool, before)),
        )
        seen = self.recorder.seen
        last = (namespace, self._new(namespace, pool, before)[WARM - 1])
        arrival, assigned = seen.lease[(namespace, lease)], seen.assigned[(namespace, lease)]
        return Sample(
            exporter_from_arrival=seen.exporter[last] - arrival,
            exporter_from_assignment=seen.exporter[last] - assigned,
            pod_from_arrival=seen.pod[last] - arrival,
            pod_from_credentials=seen.pod[last] - seen.credential[last],
        )

    def wave(self, namespace: str, pools: list[str], tag: str) -> list[Sample]:
        """Every pool's burst at once (a few writer threads), then one sample per pool."""
        started = time.monotonic()
        with ThreadPoolExecutor(LEASE_WRITERS) as writers:
            bursts = list(writers.map(lambda p: self.burst(namespace, p, tag), pools))
        self.sending[namespace].append(time.monotonic() - started)
        samples = [
            self.sample(namespace, pool, lease, before)
            for pool, (lease, before) in zip(pools, bursts, strict=True)
        ]
        self.settle(namespace, pools)
        return samples


Results = dict[tuple[str, int], list[Sample]]
Passes = dict[tuple[str, int], dict[str, float]]


Cpu = dict[tuple[str, int], dict[str, float]]


def cpu_seconds(pids: dict[str, list[int]]) -> dict[str, float]:
    """User plus system CPU seconds per named group of processes, from /proc."""
    return {name: sum(map(process_cpu_seconds, group)) for name, group in pids.items()}


def run() -> tuple[Results, Passes, Cpu, dict[int, float], str]:
    results: Results = defaultdict(list)
    passes: Passes = {}
    # cores each part kept busy while the rounds ran, averaged over them
    cpu: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    stop = threading.Event()
    with (
        tempfile.TemporaryDirectory(prefix="bench-refill-") as tmp,
        running_control_plane() as plane,
        running_webhook(plane, Path(tmp)) as server,
    ):
        workdir = Path(tmp)
        register_webhooks(plane, server)
        install_lease_crd(plane)
        recorder = Recorder(Kube(plane.api_client()))
        recorder.start(stop)
        jumpstarter = Jumpstarter(plane, recorder)
        for _ in range(STANDIN_WORKERS):
            threading.Thread(
                target=jumpstarter.issue_credentials, args=(stop,), daemon=True
            ).start()
        refill = Refill(plane, recorder, jumpstarter)
        try:
            for pools, rounds in ((1, SINGLE_ROUNDS), (MANY_POOLS, MANY_WAVES)):
                names = {r: refill.make_pools(ns_of(r, pools), pools) for r in RECONCILERS}
                with contextlib.ExitStack() as stack:
                    probes = {
                        r: stack.enter_context(running(r, m, plane, ns_of(r, pools), workdir))
                        for r, m in RECONCILERS.items()
                    }
                    for reconciler in RECONCILERS:
                        refill.settle(ns_of(reconciler, pools), names[reconciler])
                    before = {r: probe.totals() for r, probe in probes.items()}
                    order = list(RECONCILERS)
                    pids = {
                        "kube-apiserver + etcd": [p.pid for p in plane.processes],
                        "webhook": [server.process.popen.pid],
                        "reconciler": [],
                        "bench (Jumpstarter's part)": [os.getpid()],
                    }
                    for index in range(rounds):
                        for reconciler in order if index % 2 == 0 else order[::-1]:
                            ns = ns_of(reconciler, pools)
                            pids["reconciler"] = [probes[reconciler].pid]
                            cpu_before, started = cpu_seconds(pids), time.monotonic()
                            results[(reconciler, pools)] += refill.wave(
                                ns, names[reconciler], f"r{index}"
                            )
                            wall = time.monotonic() - started
                            after = cpu_seconds(pids)
                            for name, seconds in after.items():
                                cpu[(reconciler, pools)][name] += (
                                    (seconds - cpu_before[name]) / wall / rounds
                                )
                    for reconciler, probe in probes.items():
                        passes[(reconciler, pools)] = pass_figures(
                            before[reconciler], probe.totals()
                        )
        finally:
            stop.set()
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        sending = {
            pools: statistics.median(refill.sending[ns_of("ours", pools)])
            for pools in (1, MANY_POOLS)
        }
        return results, passes, cpu, sending, load


def main() -> str:
    started = datetime.now(UTC)
    results, passes, cpu, sending, load = run()
    return report(results, passes, cpu, sending, load, started)


def _p50_p95(samples: list[Sample], pick: Callable[[Sample], float]) -> str:
    values = [pick(s) for s in samples]
    return f"{percentile(values, 50) * 1000:.0f} / {percentile(values, 95) * 1000:.0f}"


def report(
    results: Results,
    passes: Passes,
    cpu: Cpu,
    sending: dict[int, float],
    load: str,
    started: datetime,
) -> str:
    lines = [
        "## refill latency (`python -m bench refill`)",
        "",
        f"Started {started:%Y-%m-%d %H:%M} UTC; load average at the end {load}. Pools keep "
        f"{WARM} warm instances; a round leases both back to back and the sample is the "
        "last lease's (it took the last warm instance). ms, p50 / p95.",
        "",
        "| pools | reconciler | leases sampled | Exporter from Lease arrival | Exporter from "
        "assignment | Pod from Lease arrival | Pod from credentials issued |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for (reconciler, pools), samples in results.items():
        lines.append(
            f"| {pools} | {reconciler} | {len(samples)} "
            f"| {_p50_p95(samples, lambda s: s.exporter_from_arrival)} "
            f"| {_p50_p95(samples, lambda s: s.exporter_from_assignment)} "
            f"| {_p50_p95(samples, lambda s: s.pod_from_arrival)} "
            f"| {_p50_p95(samples, lambda s: s.pod_from_credentials)} |"
        )
        if reconciler == "ours":
            p95 = percentile([s.exporter_from_arrival for s in samples], 95)
            verdicts.append(
                f"{pools} pool(s), ours: p95 {p95 * 1000:.0f} ms from the Lease's arrival to "
                f"the replacement Exporter: {'meets' if p95 < TARGET_P95_S else 'MISSES'} "
                f"the target (< {TARGET_P95_S:.0f} s)."
            )
    lines += [
        "",
        "Each reconciler's passes over the measured rounds, from its own metrics:",
        "",
        "| pools | reconciler | " + " | ".join(label for label, _, _ in PASS_METRICS) + " |",
        "| ---: | --- |" + " ---: |" * len(PASS_METRICS),
    ]
    for (reconciler, pools), figures in passes.items():
        values = " | ".join(f"{v:.1f}" if "ms" in k else f"{v:.0f}" for k, v in figures.items())
        lines.append(f"| {pools} | {reconciler} | {values} |")
    parts = list(next(iter(cpu.values())))
    lines += [
        "",
        "Cores kept busy while the rounds ran (2 on this machine), and the median time the "
        "bench took to send a round's Leases (3 writes each): "
        + ", ".join(f"{pools} pool(s): {s * 1000:.0f} ms" for pools, s in sending.items())
        + ".",
        "",
        "| pools | reconciler | " + " | ".join(parts) + " | all |",
        "| ---: | --- |" + " ---: |" * (len(parts) + 1),
    ]
    for (reconciler, pools), cores in cpu.items():
        values = " | ".join(f"{cores[p]:.2f}" for p in parts)
        lines.append(f"| {pools} | {reconciler} | {values} | {sum(cores.values()):.2f} |")
    return "\n".join([*lines, "", *verdicts])


if __name__ == "__main__":
    print(main())
