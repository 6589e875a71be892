"""Scale: N pools (min 2, warm buffer 2: 2N instances) on the loopback dev stack, in one run.

The stack is `make run`'s (`harness.dev`): etcd and kube-apiserver on loopback (with Jumpstarter's
Lease CRD, as in a cluster with Jumpstarter), the webhook served and registered, the
reconciler cluster-wide as its own process (leader election on), and the development
stand-in issuing credentials as Jumpstarter's controller would. Each of them, and the
benchmark itself, acts as a user of its own (static tokens), so kube-apiserver's audit
log of every request tells their requests apart. In order:

1. the bare write rate: N ConfigMaps created by `WRITERS` threads (no webhook, nobody
   watching them): the baseline of this machine and this apiserver, in this run;
2. the apply: N ExporterSets created the same way, each through both webhooks (their
   templates carry no labels, so the mutating webhook fills them in);
3. the fill, from the apply's start to the last instance's Pod (and to its last
   Exporter): the writes it took per instance and per second, by whom, against the bare
   rate;
4. steady: once no pool write has come for `QUIET` s, a window of `WINDOW` s at rest:
   requests per second by verb and resource from `apiserver_request_total`, the
   reconciler's and the stand-in's told apart by the audit log, and the RSS and CPU of
   the reconciler, the webhook, kube-apiserver and etcd (from /proc);
5. the floor, once the reconciler and the stand-in are stopped: the fill's own objects
   written again by the benchmark alone (`bench._floor`), against the bare writes and the
   fill, and the servers' CPU for it spread over every core: a bound under any fill.

Beside the times: the reconciler's passes (`controller_runtime_reconcile_total` from its
metrics) per set, its CPU-seconds per pass, and the writes per instance, during the fill.

    python -m bench scale N                   # the pools spread over 20 namespaces
    python -m bench scale N --namespaces 1    # all in one, as Jumpstarter's controller
                                              # serves one namespace
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._apiserver import READ_VERBS, WRITE_VERBS, audit_requests, request_totals
from bench._floor import FLOOR_NAMESPACE, Floor, custom_args, read_back, write_floor
from bench.webhook import _cpu_seconds as cpu_seconds
from harness.controlplane import ControlPlane, running_control_plane
from harness.stack import register_webhooks, running_reconciler, running_webhook
from harness.standin import CredentialStandIn
from pool.model.access import EXPORTERS, EXPORTERSETS, PODS
from pool.model.keys import NAME_LABEL
from reconciler.runtime.cache import Informer, keep_only
from reconciler.runtime.kube import Kube
from tests.chaos.support import metric
from tests.e2e.objects import exporter_set, install_lease_crd, virtual_target_class

__all__ = ["main"]

DEFAULT_POOLS = 100
INSTANCES = 2  # minReplicas and minAvailableReplicas of each pool
NAMESPACES = 20  # the pools are spread over these by default (fewer for fewer pools)
WRITERS = 8  # client threads of the bare writes and of the apply
QUIET = 20.0  # seconds without a pool write before the steady window
WINDOW = 60.0  # seconds of the steady window
USERS = ("reconciler", "webhook", "standin")
SERVERS = ("kube-apiserver", "etcd", "webhook")  # what serves a write, whoever sends it
PASSES = "controller_runtime_reconcile_total"


@dataclass
class Usage:
    """A process's CPU seconds and resident memory."""

    pid: int
    cpu: float = 0.0

    def start(self) -> None:
        self.cpu = cpu_seconds(self.pid)

    def cpu_since(self) -> float:
        return cpu_seconds(self.pid) - self.cpu

    def mib(self, field_name: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return float(line.split()[1]) / 1024
        return 0.0


@dataclass
class Result:
    pools: int
    namespaces: int
    started: datetime
    load_start: str
    load_end: str = ""
    bare_s: float = 0.0
    apply_s: float = 0.0
    exporters_s: float = 0.0  # from the apply's start to the last Exporter
    fill_s: float = 0.0  # from the apply's start to the last Pod
    fill_writes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    fill_cpu: dict[str, float] = field(default_factory=dict)  # share of a core
    quiet_after_s: float = 0.0  # from the last Pod to the steady window
    steady: Counter[tuple[str, str]] = field(default_factory=Counter)  # apiserver counter
    steady_by_user: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    steady_cpu: dict[str, float] = field(default_factory=dict)  # share of a core
    rss: dict[str, float] = field(default_factory=dict)  # MiB at the end
    peak: dict[str, float] = field(default_factory=dict)  # MiB, VmHWM
    exporters: int = 0
    pods: int = 0
    fill_passes: float = 0.0  # the reconciler's passes from the apply's start to the last Pod
    fill_reconciler_cpu: float = 0.0  # its CPU-seconds meanwhile
    steady_passes: float = 0.0  # its passes in the steady window
    floor: Floor | None = None  # the fill's objects written again by the benchmark alone


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _user_client(plane: ControlPlane, user: str, folder: Path) -> tuple[Path, Any]:
    """A kubeconfig and an ApiClient acting as the static-token `user`."""
    from kubernetes import client, config

    path = plane.write_kubeconfig(folder / f"{user}.kubeconfig", user, plane.tokens[user])
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = WRITERS
    return path, client.ApiClient(configuration)


def _create_all(api_client: Any, bodies: list[dict[str, Any]]) -> float:
    """Create every object with `WRITERS` threads; the seconds it took."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)

    def create(body: dict[str, Any]) -> None:
        namespace = body["metadata"]["namespace"]
        if body["kind"] == "ConfigMap":
            core.create_namespaced_config_map(namespace, body)
        else:
            resource = EXPORTERS if body["kind"] == "Exporter" else EXPORTERSETS
            custom.create_namespaced_custom_object(*custom_args(resource, namespace), body)

    started = time.monotonic()
    with ThreadPoolExecutor(WRITERS) as pool:
        for future in [pool.submit(create, body) for body in bodies]:
            future.result()
    return time.monotonic() - started


def _namespaces(pools: int, namespaces: int = NAMESPACES) -> list[str]:
    return [f"scale-{i}" for i in range(min(namespaces, pools))]


def _sets(pools: int, namespaces: int) -> list[dict[str, Any]]:
    """N sets selecting `pool: NAME`, templates without labels (both webhooks called)."""
    spaces = _namespaces(pools, namespaces)
    return [
        exporter_set(
            f"pool-{i}",
            spaces[i % len(spaces)],
            class_name="qemu",
            minReplicas=INSTANCES,
            minAvailableReplicas=INSTANCES,
        )
        for i in range(pools)
    ]


def _configmaps(pools: int, namespaces: int) -> list[dict[str, Any]]:
    spaces = _namespaces(pools, namespaces)
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"bare-{i}", "namespace": spaces[i % len(spaces)]},
            "data": {"pool": f"pool-{i}", "minReplicas": str(INSTANCES)},
        }
        for i in range(pools)
    ]


class Census:
    """Exporters and instance Pods as the benchmark's own watches see them (as the admin)."""

    def __init__(self, plane: ControlPlane) -> None:
        kube = Kube(plane.api_client())
        self.exporters = Informer(kube, EXPORTERS, transform=keep_only())
        self.pods = Informer(kube, PODS, label_selector=NAME_LABEL, transform=keep_only())

    def start(self, stop: threading.Event) -> None:
        for informer in (self.exporters, self.pods):
            threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
            informer.synced.wait(60)


def _progress(message: str) -> None:
    print(f"scale {datetime.now(UTC):%H:%M:%S}: {message}", file=sys.stderr, flush=True)


def _wait(what: str, done: Callable[[], bool], timeout: float, alive: Callable[[], None]) -> float:
    """Poll until `done`; the monotonic time it was first seen done."""
    deadline = time.monotonic() + timeout
    noted = time.monotonic()
    while not done():
        alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"scale: {what} not within {timeout:.0f} s")
        if time.monotonic() - noted > 30:
            _progress(f"waiting for {what}")
            noted = time.monotonic()
        time.sleep(0.1)
    return time.monotonic()


# What the pools' writes touch; not the leader Lease, nor what kube-apiserver writes for
# itself (its own Lease, flow control, CRD status, the `kubernetes` Service's endpoints).
POOL_RESOURCES = frozenset(
    {f"{r.plural}.{r.group}" for r in (EXPORTERS, EXPORTERSETS)} | {"pods", "secrets", "events"}
)


def _pool_writes(totals: Counter[tuple[str, str]]) -> int:
    """Writes counted by the apiserver on what the pools write."""
    return sum(
        n
        for (verb, resource), n in totals.items()
        if verb in ("POST", "PUT", "PATCH", "DELETE", "APPLY")
        and resource.split("/")[0] in POOL_RESOURCES
    )


@contextmanager
def _stack(pools: int, namespaces: int) -> Iterator[tuple[ControlPlane, dict[str, Any], Path]]:
    users = {user: ("system:masters",) for user in (*USERS, "bench")}
    with (
        running_control_plane(audit_reads=True, token_users=users) as plane,
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
    ):
        folder = Path(tmp)
        install_lease_crd(plane)  # as in a cluster with Jumpstarter: Leases are served
        clients = {user: _user_client(plane, user, folder) for user in (*USERS, "bench")}
        for namespace in _namespaces(pools, namespaces):
            plane.kubectl("create", "namespace", namespace)
            plane.kubectl("apply", "-f", "-", input=_json(virtual_target_class("qemu", namespace)))
        yield plane, clients, folder


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj)


def run(pools: int, namespaces: int = NAMESPACES) -> Result:
    result = Result(pools, len(_namespaces(pools, namespaces)), datetime.now(UTC), _load())
    expected = pools * INSTANCES
    with _stack(pools, namespaces) as (plane, clients, folder):
        webhook_config, _ = clients["webhook"]
        with running_webhook(plane, folder, kubeconfig=webhook_config) as webhook:
            register_webhooks(plane, webhook)
            bench_client = clients["bench"][1]
            result.bare_s = _create_all(bench_client, _configmaps(pools, namespaces))
            _progress(f"{pools} bare ConfigMaps in {result.bare_s:.1f} s")

            stop = threading.Event()
            census = Census(plane)
            census.start(stop)
            standin = CredentialStandIn(clients["standin"][1])
            standin_thread = threading.Thread(target=standin.run, args=(stop,), daemon=True)
            standin_thread.start()
            reconciler_config, _ = clients["reconciler"]
            others = {
                "webhook": Usage(webhook.process.popen.pid),
                "kube-apiserver": Usage(plane.pid("kube-apiserver")),
                "etcd": Usage(plane.pid("etcd")),
                "benchmark + stand-in": Usage(os.getpid()),
            }
            try:
                with running_reconciler(plane, folder, kubeconfig=reconciler_config) as rec:
                    usage = {"reconciler": Usage(rec.popen.pid), **others}
                    _ = rec.health_url  # served: it has started
                    _measure(plane, rec, census, result, usage, expected, bench_client)
            finally:
                stop.set()
            standin_thread.join(10)
            result.floor = _floor(plane, bench_client, _namespaces(pools, namespaces), others)
        result.load_end = _load()
    return result


def _floor(
    plane: ControlPlane, bench_client: Any, namespaces: list[str], usage: dict[str, Usage]
) -> Floor:
    """With the reconciler and the stand-in stopped: the fill's objects written again."""
    plane.kubectl("create", "namespace", FLOOR_NAMESPACE)
    plane.kubectl("apply", "-f", "-", input=_json(virtual_target_class("qemu", FLOOR_NAMESPACE)))
    sets, instances = read_back(bench_client, namespaces)
    _progress(f"the floor: writing {len(sets)} sets and {len(instances)} instances again")
    for process in usage.values():
        process.start()

    def shares(seconds: float) -> dict[str, float]:
        return {name: p.cpu_since() / seconds for name, p in usage.items()}

    floor = write_floor(bench_client, sets, instances, WRITERS, shares)
    _progress(f"the floor: {floor.writes:,} writes in {floor.seconds:.1f} s")
    return floor


def _measure(
    plane: ControlPlane,
    rec: Any,
    census: Census,
    result: Result,
    usage: dict[str, Usage],
    expected: int,
    bench_client: Any,
) -> None:
    alive = rec.check_alive

    def passes() -> float:
        return metric(f"{rec.metrics_url}/metrics", plane.token, PASSES)

    passes_before = passes()
    for process in usage.values():
        process.start()
    fill_start = datetime.now(UTC)
    started = time.monotonic()
    result.apply_s = _create_all(bench_client, _sets(result.pools, result.namespaces))
    _progress(f"{result.pools} sets applied in {result.apply_s:.1f} s")
    timeout = 600 + expected * 0.2
    exporters_at = _wait(
        "every Exporter", lambda: len(census.exporters) >= expected, timeout, alive
    )
    pods_at = _wait("every Pod", lambda: len(census.pods) >= expected, timeout, alive)
    fill_end = datetime.now(UTC)
    result.exporters_s, result.fill_s = exporters_at - started, pods_at - started
    result.fill_passes = passes() - passes_before
    result.fill_reconciler_cpu = usage["reconciler"].cpu_since()
    result.fill_cpu = {name: p.cpu_since() / result.fill_s for name, p in usage.items()}
    _progress(f"filled in {result.fill_s:.1f} s")

    # At rest: no pool write for QUIET seconds, then the window.
    last, last_change = _pool_writes(request_totals(plane)), time.monotonic()
    while time.monotonic() - last_change < QUIET:
        alive()
        time.sleep(2)
        now = _pool_writes(request_totals(plane))
        if now != last:
            last, last_change = now, time.monotonic()
        if time.monotonic() - pods_at > 900:
            raise RuntimeError("scale: the pools did not come to rest within 15 minutes")
    result.quiet_after_s = time.monotonic() - pods_at
    _progress(f"at rest {result.quiet_after_s:.0f} s after the last Pod; measuring")
    before = request_totals(plane)
    passes_before = passes()
    for process in usage.values():
        process.start()
    window_start = datetime.now(UTC)
    time.sleep(WINDOW)
    window_end = datetime.now(UTC)
    result.steady_passes = passes() - passes_before
    result.steady_cpu = {name: p.cpu_since() / WINDOW for name, p in usage.items()}
    after = request_totals(plane)
    result.steady = after - before
    result.rss = {name: p.mib() for name, p in usage.items()}
    result.peak = {name: p.mib("VmHWM") for name, p in usage.items()}
    result.exporters, result.pods = len(census.exporters), len(census.pods)
    counts = audit_requests(
        plane.iter_audit_events(),
        {"fill": (fill_start, fill_end), "steady": (window_start, window_end)},
    )
    result.fill_writes = Counter({k: n for k, n in counts["fill"].items() if k[1] in WRITE_VERBS})
    result.steady_by_user = counts["steady"]


# -- the report --------------------------------------------------------------------------


def _per_s(count: float) -> str:
    return f"{count / WINDOW:.2f}"


def _user(name: str) -> str:
    return {"reconciler": "reconciler", "standin": "stand-in", "webhook": "webhook"}.get(name, name)


def report(result: Result) -> str:
    sections = (_summary, _fill, _floor_report, _at_rest, _by_process)
    return "\n".join(line for section in sections for line in section(result)) + "\n"


def _summary(result: Result) -> list[str]:
    """The title, the set-up, and the tables of the headline figures: the times with their
    ratios to the same run's bare writes, then the reconciler's work during the fill."""
    n = result.pools
    bare_rate = n / result.bare_s
    spread = f" --namespaces {result.namespaces}" if result.namespaces != NAMESPACES else ""
    lines = [
        f"## scale (`python -m bench scale {n}{spread}`): {n:,} pools, {n * INSTANCES:,} instances",
        "",
        f"Started {result.started:%Y-%m-%d %H:%M} UTC; load average {result.load_start} at the "
        f"start, {result.load_end} at the end. Cluster-wide reconciler (leader election on), "
        f"pools of min {INSTANCES} and warm buffer {INSTANCES} in {result.namespaces} "
        f"namespace(s); {WRITERS} client threads for the bare writes and the apply.",
        "",
        "| bare ConfigMaps | apply of the sets (/ bare) | all Exporters | all Exporters + Pods "
        "(/ bare) | fill / apply | steady pool writes/s | reconciler reads/s | reconciler CPU "
        "| reconciler RSS (peak) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    steady_reads = sum(
        count
        for (user, verb, _), count in result.steady_by_user.items()
        if user == "reconciler" and verb in READ_VERBS
    )
    lines.append(
        f"| {result.bare_s:.1f} s ({bare_rate:.0f}/s) | {result.apply_s:.1f} s "
        f"({result.apply_s / result.bare_s:.1f}x) | {result.exporters_s:.1f} s "
        f"| {result.fill_s:.1f} s ({result.fill_s / result.bare_s:.1f}x) "
        f"| {result.fill_s / result.apply_s:.2f} | {_per_s(_pool_writes(result.steady))} "
        f"| {_per_s(steady_reads)} | {result.steady_cpu['reconciler'] * 100:.1f}% "
        f"| {result.rss['reconciler']:.0f} MiB ({result.peak['reconciler']:.0f}) |"
    )
    instances = n * INSTANCES
    ours = sum(c for (user, _, _), c in result.fill_writes.items() if user == "reconciler")
    per_pass = result.fill_reconciler_cpu / result.fill_passes if result.fill_passes else 0.0
    lines += [
        "",
        "| reconciler passes in the fill | per set | CPU-s per pass | reconciler CPU-s "
        "| writes per instance (all / reconciler) | passes at rest /s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {result.fill_passes:,.0f} | {result.fill_passes / n:.1f} | {per_pass * 1000:.1f} ms "
        f"| {result.fill_reconciler_cpu:.0f} | {sum(result.fill_writes.values()) / instances:.2f}"
        f" / {ours / instances:.2f} | {_per_s(result.steady_passes)} |",
    ]
    return lines


def _fill(result: Result) -> list[str]:
    """The fill's writes, by whom, and each process's share of a core meanwhile."""
    instances, bare_rate = result.pools * INSTANCES, result.pools / result.bare_s
    fill_total = sum(result.fill_writes.values())
    fill_rate = fill_total / result.fill_s
    lines = [
        "",
        f"The fill: {fill_total:,} writes in {result.fill_s:.1f} s, {fill_rate:.0f}/s against "
        f"the bare {bare_rate:.0f}/s ({fill_rate / bare_rate:.2f}); "
        f"{fill_total / instances:.2f} writes per instance. By whom (per instance):",
        "",
        "| user | verb | resource | writes | per instance |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for (user, verb, resource), count in sorted(
        result.fill_writes.items(), key=lambda item: -item[1]
    ):
        lines.append(
            f"| {_user(user)} | {verb} | {resource} | {count:,} | {count / instances:.2f} |"
        )
    return [
        *lines,
        "",
        "Share of a core during the fill: "
        + ", ".join(f"{name} {share * 100:.0f}%" for name, share in result.fill_cpu.items()),
    ]


def _floor_report(result: Result) -> list[str]:
    """The floor against the bare writes and the fill."""
    floor = result.floor
    if floor is None or not floor.seconds:
        return []
    bare_rate = result.pools / result.bare_s
    # The servers' CPU-seconds for the floor's writes, on every core of the machine with no
    # client at all: no writer of these objects, on this machine, can take less.
    cores = os.cpu_count() or 1
    served = sum(floor.cpu.get(name, 0.0) for name in SERVERS) * floor.seconds / cores
    return [
        "",
        f"The floor: the fill's objects written again by the benchmark alone ({WRITERS} "
        f"threads, reconciler and stand-in stopped): {floor.sets:,} sets and "
        f"{floor.instances:,} instances, {floor.writes:,} writes in {floor.seconds:.1f} s "
        f"(**{floor.seconds / result.bare_s:.1f}x the bare writes**; "
        f"{floor.writes / floor.seconds:.0f}/s, {floor.writes / floor.seconds / bare_rate:.2f} "
        f"of the bare rate). The fill took {result.fill_s / floor.seconds:.2f}x the floor.",
        "",
        f"What serving them took ({', '.join(SERVERS)}: their CPU-seconds spread over all "
        f"{cores} cores, no client): {served:.1f} s, **{served / result.bare_s:.1f}x the bare "
        "writes**, a bound under any fill on this machine.",
        "",
        "Share of a core while writing the floor: "
        + ", ".join(f"{name} {share * 100:.0f}%" for name, share in floor.cpu.items()),
    ]


def _at_rest(result: Result) -> list[str]:
    """The requests of the quiet window, by verb and resource, then by user."""
    lines = [
        "",
        f"At rest ({WINDOW:.0f} s, from {result.quiet_after_s:.0f} s after the last Pod): "
        "requests per second by verb and resource (`apiserver_request_total`):",
        "",
        "| verb | resource | per second |",
        "| --- | --- | ---: |",
    ]
    for (verb, resource), count in sorted(result.steady.items()):
        if count and resource:
            lines.append(f"| {verb} | {resource} | {_per_s(count)} |")
    lines += [
        "",
        "The same window by user (audit log: the requests received in the window; a watch "
        "shows once it has ended):",
        "",
        "| user | verb | resource | per second |",
        "| --- | --- | --- | ---: |",
    ]
    for (user, verb, resource), count in sorted(result.steady_by_user.items()):
        lines.append(f"| {_user(user)} | {verb} | {resource} | {_per_s(count)} |")
    return lines


def _by_process(result: Result) -> list[str]:
    """Each process's CPU and memory, and what the cluster holds at the end."""
    lines = [
        "",
        "| process | steady CPU (share of a core) | RSS at the end (MiB) | peak RSS (MiB) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in result.steady_cpu:
        lines.append(
            f"| {name} | {result.steady_cpu[name] * 100:.1f}% | {result.rss[name]:.0f} "
            f"| {result.peak[name]:.0f} |"
        )
    expected = result.pools * INSTANCES
    lines.append(
        f"\nExporters {result.exporters:,}, instance Pods {result.pods:,} (expected {expected:,})."
    )
    return lines


def _arguments(argv: list[str]) -> tuple[int, int]:
    """(pools, namespaces) from `N [--namespaces M]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench scale")
    parser.add_argument("pools", type=int, nargs="?", default=DEFAULT_POOLS)
    parser.add_argument("--namespaces", type=int, default=NAMESPACES)
    args = parser.parse_args(argv)
    if args.pools < 1 or args.namespaces < 1:
        raise SystemExit("scale: the numbers of pools and namespaces must be at least 1")
    return args.pools, args.namespaces


def main(argv: list[str] | None = None) -> str:
    pools, namespaces = _arguments(argv or [])
    return report(run(pools, namespaces))
