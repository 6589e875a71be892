"""Side by side: this product's drop-in and Jumpstarter main's own exporter-set controller,
each alone on the same pools, on one loopback control plane.

The plane (`harness.controlplane`, writes audited) serves Jumpstarter main's ExporterSet
and VirtualTargetClass CRDs and the 0.9.0 release's `jumpstarter.dev` CRDs, as the
takeover test's does. Each run is one controller on namespaces of its own, served by the
0.9.0 release's controller and router (`harness.jumpstarter`: they issue every
Exporter's credential and assign the Leases), and run as Jumpstarter's operator runs it,
under the operator's namespaced Role and a token of its ServiceAccount:

- theirs: main's `exporter-set-controller` binary (`harness.jumpstarter_main`);
- ours: `exporter-set-controller --provisioner=qemu.jumpstarter.dev`, this product's
  drop-in command (`reconciler.exporter_set_controller`), with `NAMESPACE`.

A run, once the controller leads (its election Lease has a holder):

1. fill: N pools (min 2, warm 2, an Immediate class, the template of the tests' exporters)
   created in one namespace; the time from the first create until every instance has its
   config Secret and its Pod (no kubelet runs: Pods stay Pending), the controller's
   writes from the audit log (its ServiceAccount's; its election Lease counted apart),
   and its CPU seconds (utime + stime) from /proc; and the 0.9.0 release's own requests
   (its controller, told apart by its User-Agent): each instance waits for the credential
   that controller issues, one Exporter at a time, so its pace bounds either fill;
2. at rest: its writes and CPU seconds in the `--rest` seconds after the last Pod, and
   its peak RSS (VmHWM) over the run;
3. refill, in a second namespace with a controller and a release of its own: M pools
   filled, each instance's exporter the release's `jmp run` (`tests.exporters`) until it
   is online; then a burst of Leases (two per pool, as many clients at once) that the
   0.9.0 controller assigns, taking every warm instance; the time until every pool again
   holds its warm instances (unleased, with config Secret and Pod). No exporter starts
   for the replacements, so no boot is timed.

Runs alternate the order (theirs first, then ours first) `--repeats` times; the report
gives each run's figures and the ratios, ours over theirs, of the medians. Then the
baseline under both fills, the release alone: as many bare Exporters as the fills made
(no exporter-set controller, no Secret or Pod of an instance), created at once in a
namespace of their own that the release serves, timed until each has its credential.

    python -m bench versus [N] [--refill-pools M] [--repeats R] [--rest S]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.access import NAMESPACED
from bench._apiserver import WRITE_VERBS, agent, audit_requests
from bench.scale import INSTANCES, Usage, _create_all, _progress, _wait
from harness.controlplane import ControlPlane, running_control_plane
from harness.jumpstarter import Jumpstarter, install_crds, running_jumpstarter
from harness.jumpstarter_build import RELEASE_SOURCE, built
from harness.jumpstarter_main import install_crds as install_main_crds
from harness.jumpstarter_main import running_exporter_set_controller
from harness.kubeget import find_json
from harness.stack import ChildProcess
from pool.model.access import ELECTION_LEASES, EXPORTERS, JUMPSTARTER_LEASES, PODS, SECRETS
from pool.model.jumpstarter import config_secret_name
from pool.model.keys import NAME_LABEL
from reconciler.runtime.cache import Informer, keep_only
from reconciler.runtime.kube import Kube
from reconciler.runtime.leader import election_id
from tests.dropin import ACCOUNT, PROVISIONER, operators_kubeconfig, ours_dropped_in
from tests.e2e.objects import apply, exporter_set, virtual_target_class
from tests.e2e.test_takeover_e2e import online
from tests.exporters import DRIVERS, running_exporters

__all__ = [
    "CONTROLLERS",
    "Alone",
    "Run",
    "alone_line",
    "bare_exporters",
    "figures",
    "main",
    "orders",
    "ratio_rows",
    "writes_of",
]

CONTROLLERS = ("theirs", "ours")
DEFAULT_POOLS = 100
REFILL_POOLS = 5  # each instance's exporter is a `jmp run` process: a few pools
REPEATS = 1  # pairs of runs, each pair in both orders
REST_S = 60.0
REFILL_TIMEOUT_S = 180.0
ELECTION = f"{ELECTION_LEASES.plural}.{ELECTION_LEASES.group}"


@dataclass
class Run:
    """One controller's run: the fill's and the refill's times, and what it cost."""

    controller: str
    pools: int
    refill_pools: int
    fill_s: float = 0.0
    fill_writes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (verb, resource)
    fill_cpu_s: float = 0.0
    release_requests: int = 0  # the 0.9.0 release's controller's, in the fill
    filled: int = 0  # instances once the fill was done
    kept: int = 0  # instances at the end of the rest
    rest_s: float = 0.0
    rest_writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    rest_cpu_s: float = 0.0
    peak_mib: float = 0.0
    assigned_s: float = 0.0  # from the burst to every Lease assigned
    refill_s: float | None = None  # from the burst to every warm buffer full; None: never
    user: str = ""
    windows: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)


@dataclass
class Alone:
    """The release alone: bare Exporters, no exporter-set controller."""

    exporters: int
    issued_s: float = 0.0  # from the first create until every credential
    requests: int = 0  # the release's, in that time
    window: tuple[datetime, datetime] | None = None


def bare_exporters(namespace: str, count: int) -> list[dict[str, Any]]:
    """`count` Exporters labelled as `count / INSTANCES` pools' instances, nothing else."""
    return [
        {
            "apiVersion": f"{EXPORTERS.group}/{EXPORTERS.version}",
            "kind": "Exporter",
            "metadata": {
                "name": f"bare-{i}",
                "namespace": namespace,
                "labels": {"pool": f"p{i // INSTANCES}"},
            },
            "spec": {},
        }
        for i in range(count)
    ]


def orders(repeats: int) -> list[str]:
    """The runs' controllers: theirs then ours, then ours then theirs, `repeats` times."""
    return [c for _ in range(repeats) for c in (*CONTROLLERS, *reversed(CONTROLLERS))]


def writes_of(counts: Counter[tuple[str, str, str]], user: str) -> Counter[tuple[str, str]]:
    """The writes `user` made, by (verb, resource), from `audit_requests`' counts."""
    return Counter(
        {
            (verb, resource): n
            for (who, verb, resource), n in counts.items()
            if who == user and verb in WRITE_VERBS
        }
    )


def _pool_writes(writes: Mapping[tuple[str, str], int]) -> int:
    """Writes apart from the controller's election Lease."""
    return sum(n for (_, resource), n in writes.items() if resource != ELECTION)


def figures(run: Run) -> dict[str, float | None]:
    """The figures the report compares, by name."""
    return {
        "fill s": run.fill_s,
        "instances per pool, filled": run.filled / run.pools,
        "instances per pool, after the rest": run.kept / run.pools,
        "fill writes per instance": _pool_writes(run.fill_writes) / max(run.filled, 1),
        "fill CPU s": run.fill_cpu_s,
        "the release's requests per instance in the fill": run.release_requests
        / max(run.filled, 1),
        "the release's requests per s in the fill": run.release_requests / run.fill_s
        if run.fill_s
        else None,
        "refill s": run.refill_s,
        "writes at rest (election Lease apart)": float(_pool_writes(run.rest_writes)),
        "election Lease writes at rest": float(run.rest_writes.get(("update", ELECTION), 0)),
        "CPU s at rest": run.rest_cpu_s,
        "peak RSS MiB": run.peak_mib,
    }


def _median(values: Sequence[float | None]) -> float | None:
    """The median, or None when any value is missing (a run that never got there)."""
    if not values or any(v is None for v in values):
        return None
    return float(statistics.median(v for v in values if v is not None))


def ratio_rows(runs: Sequence[Run]) -> list[tuple[str, float | None, float | None, float | None]]:
    """Per figure: the median of theirs, of ours, and ours over theirs (None where a median
    is missing or theirs is 0)."""
    by_controller = {c: [figures(r) for r in runs if r.controller == c] for c in CONTROLLERS}
    rows = []
    for name in figures(runs[0]):
        theirs, ours = (_median([f[name] for f in by_controller[c]]) for c in CONTROLLERS)
        ratio = ours / theirs if ours is not None and theirs else None
        rows.append((name, theirs, ours, ratio))
    return rows


# -- what the bench sees ------------------------------------------------------------------


class Census:
    """A namespace's Exporters, instance Pods, config Secrets and Leases, as the bench's
    own watches (as the admin) see them."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        kube = Kube(plane.api_client(), mode=NAMESPACED)  # Secrets listed in one namespace
        self.namespace = namespace
        self.exporters = Informer(
            kube,
            EXPORTERS,
            namespace,
            transform=keep_only("status.conditions", "status.credential"),
        )
        self.pods = Informer(
            kube, PODS, namespace, label_selector=NAME_LABEL, transform=keep_only()
        )
        self.secrets = Informer(
            kube, SECRETS, namespace, label_selector=NAME_LABEL, transform=keep_only()
        )
        self.leases = Informer(
            kube, JUMPSTARTER_LEASES, namespace, transform=keep_only("status.exporterRef")
        )
        self.stop = threading.Event()

    @contextlib.contextmanager
    def watching(self) -> Iterator[Census]:
        informers = (self.exporters, self.pods, self.secrets, self.leases)
        for informer in informers:
            threading.Thread(target=informer.run, args=(self.stop,), daemon=True).start()
        for informer in informers:
            informer.synced.wait(60)
        try:
            yield self
        finally:
            self.stop.set()

    def leased(self) -> set[str]:
        return {
            str(ref["name"])
            for lease in self.leases.items()
            if (ref := (lease.get("status") or {}).get("exporterRef") or {}).get("name")
        }

    def by_pool(self) -> dict[str, list[dict[str, Any]]]:
        """Each pool's live Exporters."""
        found: dict[str, list[dict[str, Any]]] = {}
        for exporter in self.exporters.items():
            meta = exporter["metadata"]
            if not meta.get("deletionTimestamp"):
                found.setdefault((meta.get("labels") or {}).get("pool", ""), []).append(exporter)
        return found

    def complete(self, exporter: str) -> bool:
        """The instance has its config Secret and its Pod."""
        ns = self.namespace
        return bool(
            self.pods.get(ns, exporter) and self.secrets.get(ns, config_secret_name(exporter))
        )

    def live(self) -> int:
        return sum(map(len, self.by_pool().values()))

    def credentialed(self) -> int:
        """Exporters the release has issued a credential to."""
        return sum(1 for e in self.exporters.items() if (e.get("status") or {}).get("credential"))

    def filled(self, pools: Sequence[str], *, every: bool = False) -> bool:
        """Every pool holds its warm instances: unleased, with config Secret and Pod (and,
        with `every`, so does every other instance of the namespace)."""
        leased, found = self.leased(), self.by_pool()
        if every and not all(
            self.complete(e["metadata"]["name"]) for group in found.values() for e in group
        ):
            return False
        return all(
            sum(
                1
                for e in found.get(pool, [])
                if e["metadata"]["name"] not in leased and self.complete(e["metadata"]["name"])
            )
            >= INSTANCES
            for pool in pools
        )

    def online(self, pools: Sequence[str]) -> bool:
        found = self.by_pool()
        return all(sum(map(online, found.get(pool, []))) >= INSTANCES for pool in pools)


# -- a controller on a namespace ----------------------------------------------------------


def _leads(plane: ControlPlane, namespace: str) -> bool:
    found = find_json(
        plane, "leases.coordination.k8s.io", election_id(PROVISIONER), "-n", namespace
    )
    return bool(found and (found.get("spec") or {}).get("holderIdentity"))


@contextlib.contextmanager
def _served(
    plane: ControlPlane, controller: str, namespace: str, workdir: Path
) -> Iterator[tuple[ChildProcess, Jumpstarter]]:
    """`namespace` made and served by the 0.9.0 release, `controller` running there under
    the operator's Role and leading when yielded."""
    plane.kubectl("create", "namespace", namespace)
    apply(plane, virtual_target_class("qemu", namespace, bindingMode="Immediate"))
    with contextlib.ExitStack() as stack:
        served = stack.enter_context(running_jumpstarter(plane, namespace, workdir / "jumpstarter"))
        if controller == "ours":
            process = ours_dropped_in(plane, namespace, workdir)
            stack.callback(process.stop)
        else:
            kubeconfig = operators_kubeconfig(plane, namespace, workdir)
            process = stack.enter_context(
                running_exporter_set_controller(
                    plane, namespace, workdir / "theirs", kubeconfig=kubeconfig
                )
            )
        _wait(f"{controller} leading", lambda: _leads(plane, namespace), 120, process.check_alive)
        yield process, served


def _pools(namespace: str, prefix: str, count: int) -> list[dict[str, Any]]:
    """`count` pools of min 2, warm 2 (room for as many leased beside them)."""
    sets = []
    for i in range(count):
        body = exporter_set(
            f"{prefix}{i}",
            namespace,
            class_name="qemu",
            with_template=True,
            minReplicas=INSTANCES,
            minAvailableReplicas=INSTANCES,
            maxReplicas=2 * INSTANCES,
        )
        body["spec"]["template"]["spec"] = {"drivers": DRIVERS}
        sets.append(body)
    return sets


def _fill(plane: ControlPlane, run: Run, namespace: str, workdir: Path, rest: float) -> None:
    with _served(plane, run.controller, namespace, workdir) as (process, _):
        usage = Usage(process.popen.pid)
        census = Census(plane, namespace)
        with census.watching():
            bodies = _pools(namespace, "p", run.pools)
            names = [b["metadata"]["name"] for b in bodies]
            usage.start()
            start, started = datetime.now(UTC), time.monotonic()
            _create_all(plane.api_client(), bodies)
            done = _wait(
                "every instance",
                lambda: census.filled(names, every=True),
                1800,
                process.check_alive,
            )
            run.fill_s, run.fill_cpu_s = done - started, usage.cpu_since()
            run.filled = census.live()
            filled = datetime.now(UTC)
            _progress(f"{run.controller}: {run.pools} pools filled in {run.fill_s:.1f} s")
            usage.start()
            time.sleep(rest)
            process.check_alive()
            run.rest_s, run.rest_cpu_s = rest, usage.cpu_since()
            run.peak_mib, run.kept = usage.mib("VmHWM"), census.live()
            run.windows = {"fill": (start, filled), "rest": (filled, datetime.now(UTC))}
            run.user = f"system:serviceaccount:{namespace}:{ACCOUNT}"


def _refill(plane: ControlPlane, run: Run, namespace: str, workdir: Path) -> None:
    with (
        _served(plane, run.controller, namespace, workdir) as (process, jumpstarter),
        running_exporters(plane, namespace, workdir / "exporters") as exporters,
    ):
        census = Census(plane, namespace)
        with census.watching():
            bodies = _pools(namespace, "r", run.refill_pools)
            names = [b["metadata"]["name"] for b in bodies]
            apply(plane, *bodies)
            _wait("the refill pools online", lambda: census.online(names), 300, process.check_alive)
            exporters.pause()  # no exporter for the replacements: no boot is timed
            requests = [(f"pool={p}", f"{p}-l{j}") for p in names for j in range(INSTANCES)]
            started = time.monotonic()
            jumpstarter.request_leases(requests)
            assigned = _wait(
                "every Lease assigned",
                lambda: len(census.leased()) >= len(requests),
                REFILL_TIMEOUT_S,
                process.check_alive,
            )
            run.assigned_s = assigned - started
            with contextlib.suppress(RuntimeError):  # never: no figure
                full = _wait(
                    "every warm buffer full again",
                    lambda: census.filled(names),
                    REFILL_TIMEOUT_S,
                    process.check_alive,
                )
                run.refill_s = full - started
            _progress(f"{run.controller}: refill {run.refill_s} s (assigned {run.assigned_s:.1f})")


def _release_alone(plane: ControlPlane, alone: Alone, namespace: str, workdir: Path) -> None:
    plane.kubectl("create", "namespace", namespace)
    census = Census(plane, namespace)
    with running_jumpstarter(plane, namespace, workdir), census.watching():
        start, started = datetime.now(UTC), time.monotonic()
        _create_all(plane.api_client(), bare_exporters(namespace, alone.exporters))
        done = _wait(
            "every bare Exporter's credential",
            lambda: census.credentialed() >= alone.exporters,
            1800,
            lambda: None,
        )
        alone.issued_s, alone.window = done - started, (start, datetime.now(UTC))
        _progress(f"the release alone: {alone.exporters} credentials in {alone.issued_s:.1f} s")


# -- the runs -------------------------------------------------------------------------------


@contextlib.contextmanager
def _plane() -> Iterator[ControlPlane]:
    """An audited plane serving main's two kinds and the release's `jumpstarter.dev` ones."""
    with running_control_plane(install_crds=False, audit=True) as plane:
        install_main_crds(plane)
        install_crds(plane)
        yield plane


def run(pools: int, refill_pools: int, repeats: int, rest: float) -> tuple[list[Run], Alone]:
    runs, alone = [], Alone(pools * INSTANCES)
    with _plane() as plane, tempfile.TemporaryDirectory(prefix="bench-versus-") as tmp:
        for index, controller in enumerate(orders(repeats)):
            one = Run(controller, pools, refill_pools)
            workdir = Path(tmp) / f"{index}-{controller}"
            _fill(plane, one, f"vs{index}-{controller}", workdir / "fill", rest)
            _refill(plane, one, f"vs{index}-{controller}-refill", workdir / "refill")
            runs.append(one)
        _release_alone(plane, alone, "vs-alone", Path(tmp) / "alone")
        windows = {f"{i} {w}": span for i, r in enumerate(runs) for w, span in r.windows.items()}
        counts = audit_requests(plane.iter_audit_events(), windows)
        fills = {f"{i} fill": r.windows["fill"] for i, r in enumerate(runs)}
        assert alone.window is not None
        fills["alone"] = alone.window
        by_agent = audit_requests(plane.iter_audit_events(), fills, who=agent)
        release = built(RELEASE_SOURCE).controller.name  # its User-Agent's product

        def of_release(window: str) -> int:
            return sum(n for (who, _, _), n in by_agent[window].items() if who == release)

        for i, one in enumerate(runs):
            one.fill_writes = writes_of(counts[f"{i} fill"], one.user)
            one.rest_writes = writes_of(counts[f"{i} rest"], one.user)
            one.release_requests = of_release(f"{i} fill")
        alone.requests = of_release("alone")
    return runs, alone


# -- the report -----------------------------------------------------------------------------


def _figure(value: float | None) -> str:
    if value is None:
        return "never"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:,.0f}"


def alone_line(alone: Alone, runs: Sequence[Run]) -> str:
    """The baseline under both fills, and each controller's median fill over it."""
    per = alone.requests / max(alone.exporters, 1)
    pace = alone.requests / alone.issued_s if alone.issued_s else 0.0
    medians = {c: _median([r.fill_s for r in runs if r.controller == c]) for c in CONTROLLERS}
    over = ", ".join(
        f"{c} {_figure(m / alone.issued_s if m and alone.issued_s else None)}"
        for c, m in medians.items()
    )
    return (
        f"The release alone (no exporter-set controller): {alone.exporters:,} bare Exporters "
        f"created at once, every credential issued in {alone.issued_s:.1f} s; its requests "
        f"{per:.2f} per Exporter, {pace:.2f} per s. Each median fill over it: {over}."
    )


def report(runs: Sequence[Run], alone: Alone, command: str, started: datetime, load: str) -> str:
    first = runs[0]
    names = list(figures(first))
    lines = [
        f"## versus (`{command}`): {first.pools:,} pools, refill of {first.refill_pools}",
        "",
        f"Started {started:%Y-%m-%d %H:%M} UTC; load average at the end {load}. Each run is "
        "one controller alone, under the operator's Role; the 0.9.0 release issues "
        "credentials and assigns Leases. Pools of min 2, warm 2 in one namespace.",
        "",
        "| run | controller | " + " | ".join(names) + " |",
        "| ---: | --- |" + " ---: |" * len(names),
    ]
    for index, one in enumerate(runs):
        values = " | ".join(_figure(v) for v in figures(one).values())
        lines.append(f"| {index + 1} | {one.controller} | {values} |")
    lines += [
        "",
        "Medians, and ours over theirs:",
        "",
        "| figure | theirs | ours | ours / theirs |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, theirs, ours, ratio in ratio_rows(runs):
        shown = "n/a" if ratio is None else f"{ratio:.2f}"
        lines.append(f"| {name} | {_figure(theirs)} | {_figure(ours)} | {shown} |")
    lines += ["", alone_line(alone, runs)]
    lines += ["", "Each controller's writes in the fill, by verb and resource (per instance):", ""]
    lines += [
        "| run | controller | verb | resource | per instance |",
        "| ---: | --- | --- | --- | ---: |",
    ]
    for index, one in enumerate(runs):
        for (verb, resource), n in sorted(one.fill_writes.items()):
            per = n / (one.pools * INSTANCES)
            lines.append(f"| {index + 1} | {one.controller} | {verb} | {resource} | {per:.2f} |")
    return "\n".join(lines) + "\n"


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench versus")
    parser.add_argument("pools", type=int, nargs="?", default=DEFAULT_POOLS)
    parser.add_argument("--refill-pools", type=int, default=REFILL_POOLS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--rest", type=float, default=REST_S, help="seconds at rest (60; 30 quick)")
    args = parser.parse_args(argv)
    if min(args.pools, args.refill_pools, args.repeats) < 1 or args.rest <= 0:
        raise SystemExit("versus: the pools, refill pools, repeats and rest must be positive")
    return args


def main(argv: list[str] | None = None) -> str:
    argv = argv or []
    args = _arguments(argv)
    started = datetime.now(UTC)
    runs, alone = run(args.pools, args.refill_pools, args.repeats, args.rest)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return report(runs, alone, " ".join(["python -m bench versus", *argv]), started, load)
