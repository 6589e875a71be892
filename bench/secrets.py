"""What a cluster-wide Secret watch costs the reconciler, with 10,000 unrelated Secrets.

A cluster-wide install reads the Secrets it needs by name (`reconciler.runtime.named`); before,
it listed and watched every Secret in the cluster. On a loopback kube-apiserver
(`harness.controlplane`) holding `UNRELATED` Secrets the reconciler never uses
(`PAYLOAD` bytes of data each, in `SPREAD` namespaces, as Helm releases and tokens are)
and a few pools whose instances have credentials (the development stand-in plays
Jumpstarter), two reconcilers run as processes, one at a time, in alternating rounds:
`virtualtarget reconcile` (by name) and the same program with the cluster-wide Secret
list and watch (`bench._secret_watch`, the baseline). Measured per run, from /proc:

- start to ready (`/readyz`), and the CPU seconds spent until then;
- resident memory once ready, and its peak (VmHWM) at the end;
- CPU seconds while `CHURN` unrelated Secrets are updated (and `SETTLE` s after), which
  the watch receives and the reads by name never see.

    VIRTUALTARGET_BIN_DIR=... python -m bench secrets
"""

from __future__ import annotations

import base64
import os
import secrets
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.webhook import _cpu_seconds as process_cpu_seconds
from harness.controlplane import ControlPlane, running_control_plane
from harness.stack import ChildProcess, reconciler_args, served_url
from harness.standin import CredentialStandIn
from scrape.serving import SERVING_PROBES
from tests.e2e.objects import apply, exporter_set, get_json, virtual_target_class

UNRELATED = 10_000
SPREAD = 20  # namespaces the unrelated Secrets are spread over
PAYLOAD = 2048  # bytes of data in each
CHURN = 1_000  # unrelated Secrets updated in the measured window
SETTLE = 5.0  # seconds after the churn, for the watch to drain
POOLS, INSTANCES = 5, 2
ROUNDS = 2  # runs of each variant, alternating
WRITERS = 8
VARIANTS = {"by name (ours)": "virtualtarget.cli", "cluster-wide watch": "bench._secret_watch"}


@dataclass(frozen=True)
class Run:
    variant: str
    ready_s: float
    cpu_ready_s: float
    rss_ready_mib: float
    cpu_churn_s: float
    rss_end_mib: float
    peak_mib: float


def _status_kib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return float(line.split()[1])
    return 0.0


def _mib(pid: int, field: str) -> float:
    return _status_kib(pid, field) / 1024


def _parallel(jobs: list[Callable[[], Any]]) -> None:
    with ThreadPoolExecutor(WRITERS) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def _unrelated(plane: ControlPlane) -> list[tuple[str, str]]:
    from kubernetes import client

    core = client.CoreV1Api(plane.api_client())
    namespaces = [f"unrelated-{i}" for i in range(SPREAD)]
    for namespace in namespaces:
        plane.kubectl("create", "namespace", namespace)
    names = [(namespaces[i % SPREAD], f"release-{i}") for i in range(UNRELATED)]

    def create(namespace: str, name: str) -> Callable[[], Any]:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": {"owner": "helm"}},
            "data": {"release": base64.b64encode(os.urandom(PAYLOAD)).decode()},
        }
        return lambda: core.create_namespaced_secret(namespace, body)

    _parallel([create(ns, name) for ns, name in names])
    return names


def _churn(plane: ControlPlane, names: list[tuple[str, str]]) -> None:
    from kubernetes import client

    core = client.CoreV1Api(plane.api_client())

    def update(namespace: str, name: str) -> Callable[[], Any]:
        patch = {"data": {"release": base64.b64encode(os.urandom(PAYLOAD)).decode()}}
        return lambda: core.patch_namespaced_secret(name, namespace, patch)

    _parallel([update(ns, name) for ns, name in secrets.SystemRandom().sample(names, CHURN)])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def _filled(plane: ControlPlane) -> bool:
    secrets_found = get_json(plane, "secrets", "-n", "lab")["items"]
    configs = [s for s in secrets_found if s["metadata"]["name"].startswith("exporter-config-")]
    return len(configs) == POOLS * INSTANCES


def _measure(plane: ControlPlane, workdir: Path, variant: str, names: list[tuple[str, str]]) -> Run:
    args = reconciler_args(plane.kubeconfig)
    process = ChildProcess.start(
        f"reconciler-{len(list(workdir.iterdir()))}",
        [*args, "--no-leader-election", "--metrics-bind-address=0"],
        workdir,
        module=VARIANTS[variant],
    )
    pid = process.popen.pid
    try:
        started = time.monotonic()
        health_url = served_url(Path(process.log.name), SERVING_PROBES, "http", process.popen)
        while not _ready(health_url):
            process.check_alive()
            time.sleep(0.05)
        ready_s = time.monotonic() - started
        cpu_ready, rss_ready = process_cpu_seconds(pid), _mib(pid, "VmRSS")
        deadline = time.monotonic() + 120
        while not _filled(plane):
            process.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{variant}: the pools did not fill")
            time.sleep(0.3)
        before = process_cpu_seconds(pid)
        _churn(plane, names)
        time.sleep(SETTLE)
        process.check_alive()
        return Run(
            variant,
            ready_s,
            cpu_ready,
            rss_ready,
            process_cpu_seconds(pid) - before,
            _mib(pid, "VmRSS"),
            _mib(pid, "VmHWM"),
        )
    finally:
        process.stop()


def run() -> tuple[list[Run], float, str]:
    with (
        running_control_plane() as plane,
        tempfile.TemporaryDirectory(prefix="bench-secrets-") as tmp,
    ):
        created = time.monotonic()
        names = _unrelated(plane)
        setup_s = time.monotonic() - created
        plane.kubectl("create", "namespace", "lab")
        for index in range(POOLS):
            name = f"pool-{index}"
            apply(
                plane,
                virtual_target_class(name, "lab"),
                exporter_set(
                    name, "lab", class_name=name, with_template=True, minReplicas=INSTANCES
                ),
            )
        stop = threading.Event()
        standin = CredentialStandIn(plane.api_client(), namespace="lab")
        threading.Thread(target=standin.run, args=(stop,), daemon=True).start()
        runs = []
        try:
            for _ in range(ROUNDS):
                for variant in VARIANTS:
                    runs.append(_measure(plane, Path(tmp), variant, names))
        finally:
            stop.set()
        load = Path("/proc/loadavg").read_text().split()[:3]
    return runs, setup_s, " ".join(load)


def report(runs: list[Run], setup_s: float, load: str, started: datetime) -> str:
    lines = [
        "## secrets (`python -m bench secrets`): the cluster-wide Secret watch, or reads by name",
        "",
        f"Started {started:%Y-%m-%d %H:%M} UTC; load average at the end {load}. "
        f"{UNRELATED:,} unrelated Secrets of {PAYLOAD} bytes in {SPREAD} namespaces "
        f"(created in {setup_s:.0f} s), {POOLS} pools of {INSTANCES} credentialed instances; "
        f"{ROUNDS} runs of each reconciler, alternating; CPU while {CHURN:,} unrelated Secrets "
        f"are updated and {SETTLE:.0f} s after.",
        "",
        "| reconciler | run | ready (s) | CPU to ready (s) | RSS ready (MiB) | CPU during churn "
        "(s) | RSS at end (MiB) | peak RSS (MiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.variant] = counts.get(r.variant, 0) + 1
        lines.append(
            f"| {r.variant} | {counts[r.variant]} | {r.ready_s:.2f} | {r.cpu_ready_s:.2f} "
            f"| {r.rss_ready_mib:.1f} | {r.cpu_churn_s:.2f} | {r.rss_end_mib:.1f} "
            f"| {r.peak_mib:.1f} |"
        )
    lines += ["", "Medians:", ""]
    lines += [
        "| reconciler | ready (s) | CPU to ready (s) | peak RSS (MiB) | CPU during churn (s) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for variant in VARIANTS:
        mine = [r for r in runs if r.variant == variant]
        lines.append(
            f"| {variant} | {statistics.median(r.ready_s for r in mine):.2f} "
            f"| {statistics.median(r.cpu_ready_s for r in mine):.2f} "
            f"| {statistics.median(r.peak_mib for r in mine):.1f} "
            f"| {statistics.median(r.cpu_churn_s for r in mine):.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> str:
    started = datetime.now(UTC)
    runs, setup_s, load = run()
    return report(runs, setup_s, load, started)
