"""Reconciler benchmarks, each beside a baseline measured in the same run.

- planner, one set of 10,000 exporters: `plan()` vs building its observation from the
  raw objects (the cost any planner would pay to read its input);
- one full pass over 1,000 sets (10 exporters each, 100 namespaces) through the real
  `Controller.sync` on filled caches, vs a no-op pass that only fetches each set;
- memory of the caches at 10,000 exporters (+ their Pods), vs the same objects as the
  JSON the API sends;
- API writes of a steady-state pass (target 0), vs the first pass that converges status;
- one pass over 1,000 sets of 2 credentialed instances, their config Secrets in place:
  the pass as it runs (each config rendered and compared with the cached Secret) vs the
  same pass without the comparison, and its writes (target 0) vs the first pass's.

No cluster: caches are filled through `Informer.apply` with objects shaped like the
apiserver's (managedFields included); any API call is counted, and in the steady state
none may happen.

With VIRTUALTARGET_BENCH_BEFORE naming another work tree (main's, say), the two headline
figures (the planner at 10,000 exporters, a pass over 1,000 sets) are also measured for
both trees, each in a fresh interpreter, alternating `ROUNDS` times, and printed side by
side with the change: the best run of each, the measure other work on a shared machine
disturbs least (the other tree needs `headline()` too):

    VIRTUALTARGET_BENCH_BEFORE=/path/to/main .venv/bin/python -m bench reconciler
"""

from __future__ import annotations

import base64
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

from pool.model.access import (
    CLASSES,
    CONFIGMAPS,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    PODS,
    SECRETS,
)
from pool.model.adapt import exporter_view, lease_view, pod_view, pool_view
from pool.model.jumpstarter import DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY
from pool.model.keys import LEASE_PROTECTION, NAME_LABEL, SERVED_LEASE, SET_LABEL
from pool.model.views import ClassView, Observation
from pool.rendering.provisioners import provisioner
from pool.rules.planner import plan
from reconciler.runtime.controller import Controller
from reconciler.runtime.executor import Executor

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
REPO_ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 4  # alternating rounds of each tree in a before/after comparison
STAMP = "2026-01-01T00:00:00Z"
RUNS = 5


def _managed_fields() -> list[dict[str, Any]]:
    return [
        {
            "manager": "jumpstarter-controller",
            "operation": "Update",
            "apiVersion": "jumpstarter.dev/v1alpha1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        ".": {},
                        'k:{"type":"Online"}': {},
                        'k:{"type":"Registered"}': {},
                    },
                    "f:devices": {},
                    "f:endpoint": {},
                    "f:exporterStatus": {},
                    "f:lastSeen": {},
                }
            },
            "subresource": "status",
        }
    ]


def exporter(ns: str, set_name: str, set_uid: str, index: int, kind: str) -> dict[str, Any]:
    name = f"{set_name}-{index}"
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": t,
                "status": "True" if kind != "booting" else "False",
                "reason": t,
                "message": "",
                "lastTransitionTime": STAMP,
            }
            for t in ("Registered", "Online")
        ],
        "exporterStatus": {"busy": "LeaseReady", "booting": "Offline"}.get(kind, "Available"),
        "endpoint": "grpc://jumpstarter.example:8082",
        "lastSeen": STAMP,
        "devices": [{"uuid": f"{name}-{d}", "labels": {"driver": "qemu"}} for d in range(3)],
    }
    annotations = {}
    finalizers = []
    if kind == "busy":
        status["leaseRef"] = {"name": f"lease-{name}"}
        annotations[SERVED_LEASE] = f"lease-{name}"  # remembered on an earlier pass
        finalizers.append(LEASE_PROTECTION)  # likewise
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Exporter",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "resourceVersion": str(1000 + index),
            "creationTimestamp": STAMP,
            "generation": 1,
            "labels": {"board": set_name, SET_LABEL: set_name},
            "annotations": annotations,
            "finalizers": finalizers,
            "ownerReferences": [
                {
                    "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
                    "kind": "ExporterSet",
                    "name": set_name,
                    "uid": set_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": _managed_fields(),
        },
        "spec": {"enabled": kind != "draining"},
        "status": status,
    }


def pod(ns: str, set_name: str, exporter_obj: dict[str, Any]) -> dict[str, Any]:
    name = exporter_obj["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"pod-{ns}-{name}",
            "resourceVersion": "1",
            "labels": {"board": set_name, SET_LABEL: set_name, NAME_LABEL: set_name},
            "ownerReferences": [
                {
                    "apiVersion": "jumpstarter.dev/v1alpha1",
                    "kind": "Exporter",
                    "name": name,
                    "uid": exporter_obj["metadata"]["uid"],
                    "controller": True,
                }
            ],
            "managedFields": _managed_fields(),
        },
        "spec": {
            "containers": [{"name": "exporter", "image": "e:1"}, {"name": "qemu", "image": "q:1"}]
        },
        "status": {"phase": "Running"},
    }


def exporter_set(ns: str, name: str, warm: int, ceiling: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "ExporterSet",
        "metadata": {"name": name, "namespace": ns, "uid": f"set-{ns}-{name}", "generation": 1},
        "spec": {
            "virtualTargetClassName": "qemu",
            "selector": {"matchLabels": {"board": name}},
            "template": {"metadata": {"labels": {"board": name}}},
            "minAvailableReplicas": warm,
            "maxReplicas": ceiling,
            "scaleDownCooldown": "5m",
        },
    }


def mix(count: int) -> list[str]:
    """60% available, 30% busy, 5% booting, 5% draining (admin-disabled), spread evenly."""
    pattern = ["available"] * 12 + ["busy"] * 6 + ["booting", "draining"]
    return [pattern[(i * 7) % 20] for i in range(count)]


def steady_warm(kinds: list[str]) -> int:
    """The warm buffer for which the pool is exactly at its desired size (no scaling)."""
    return kinds.count("available") + kinds.count("booting")


def _median(fn: Any, runs: int = RUNS, pick: Any = statistics.median) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(pick(times))


def bench_planner(pick: Any = statistics.median) -> tuple[float, float, int]:
    ns, name = "big", "pool"
    kinds = mix(10_000)
    set_obj = exporter_set(ns, name, warm=steady_warm(kinds) - 50)  # 50 pending Leases fill it
    exporters = [exporter(ns, name, "set-big-pool", i, k) for i, k in enumerate(kinds)]
    pods = [pod(ns, name, e) for e in exporters]
    leases = [
        {
            "metadata": {"name": f"lease-{e['metadata']['name']}"},
            "status": {"exporterRef": {"name": e["metadata"]["name"]}},
        }
        for e in exporters
        if "leaseRef" in e["status"]
    ] + [
        {
            "metadata": {"name": f"pending-{i}"},
            "spec": {"selector": {"matchLabels": {"board": name}}},
        }
        for i in range(50)
    ]

    def observe() -> Observation:
        pool, _ = pool_view(set_obj)
        return Observation(
            pool=pool,
            klass=ClassView("qemu", "Immediate", "Delete"),
            exporters=tuple(exporter_view(e) for e in exporters),
            pods=tuple(pod_view(p) for p in pods),
            leases=tuple(lease_view(lease) for lease in leases),
        )

    obs = observe()
    result = plan(obs, NOW)
    return _median(observe), _median(lambda: plan(obs, NOW), pick=pick), len(result.actions)


class CountingKube:
    """Stands in for the API client: counts calls; a steady state must make none. Created
    objects are kept, so a benchmark can feed them back into the caches as a watch would."""

    def __init__(self) -> None:
        self.calls = 0
        self.created: list[tuple[Any, dict[str, Any]]] = []

    def create(self, resource: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        meta = body.get("metadata") or {}
        if "generateName" in meta and "name" not in meta:  # as the apiserver completes it
            body = {**body, "metadata": {**meta, "name": f"{meta['generateName']}{self.calls}"}}
        self.created.append((resource, body))
        return body

    def patch(
        self, resource: Any, ns: str, name: str, body: dict[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        self.calls += 1
        return {}

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return None

        return call


def _controller(
    namespaces: int, parameters: dict[str, Any] | None = None
) -> tuple[Controller, CountingKube]:
    """A controller on a counting client, with the class `qemu` in each namespace."""
    kube = CountingKube()
    controller = Controller(kube, provisioner("qemu.jumpstarter.dev"), clock=lambda: NOW)  # type: ignore[arg-type]
    for n in range(namespaces):
        spec: dict[str, Any] = {"provisioner": "qemu.jumpstarter.dev"}
        if parameters:
            spec["parameters"] = parameters
        controller.informers[CLASSES].apply(
            "ADDED", {"metadata": {"name": "qemu", "namespace": f"ns-{n}"}, "spec": spec}
        )
    return controller, kube


def _first_pass(controller: Controller, keys: list[tuple[str, str]]) -> None:
    """Every set once, its new status fed back to the cache as a watch would."""
    sets = controller.informers[EXPORTERSETS]
    for key in keys:
        result = controller.sync(key)
        assert result is not None
        obj = sets.get(*key)
        assert obj is not None
        sets.apply("MODIFIED", {**obj, "status": dict(result.status)})


def filled_controller(sets: int, per_set: int, namespaces: int) -> tuple[Controller, CountingKube]:
    controller, kube = _controller(namespaces)
    informers = controller.informers
    for s in range(sets):
        ns, name = f"ns-{s % namespaces}", f"pool{s}"
        kinds = mix(per_set)
        set_obj = exporter_set(ns, name, warm=steady_warm(kinds), ceiling=per_set * 2)
        informers[EXPORTERSETS].apply("ADDED", set_obj)
        for i, kind in enumerate(kinds):
            e = exporter(ns, name, set_obj["metadata"]["uid"], i, kind)
            informers[EXPORTERS].apply("ADDED", e)
            informers[PODS].apply("ADDED", pod(ns, name, e))
            if kind == "busy":
                informers[JUMPSTARTER_LEASES].apply(
                    "ADDED",
                    {
                        "metadata": {"name": f"lease-{e['metadata']['name']}", "namespace": ns},
                        "spec": {"selector": {"matchLabels": {"board": name}}},
                        "status": {"exporterRef": {"name": e["metadata"]["name"]}},
                    },
                )
    return controller, kube


def bench_pass(pick: Any = statistics.median) -> dict[str, float]:
    controller, kube = filled_controller(1000, 10, 100)
    keys = [
        (s["metadata"]["namespace"], s["metadata"]["name"])
        for s in controller.informers[EXPORTERSETS].items()
    ]
    sets = controller.informers[EXPORTERSETS]

    # First pass: every status is new; apply the status writes to the cache as a watch would.
    before = kube.calls
    _first_pass(controller, keys)
    first_writes = kube.calls - before

    def full() -> None:
        for key in keys:
            controller.sync(key)

    def noop() -> None:
        for key in keys:
            sets.get(*key)

    before = kube.calls
    full_s = _median(full, pick=pick)
    steady_writes = (kube.calls - before) / RUNS
    return {
        "full_s": full_s,
        "noop_s": _median(noop),
        "first_writes": first_writes,
        "steady_writes": steady_writes,
    }


CA_PEM = "-----BEGIN CERTIFICATE-----\n" + "MIIB" * 300 + "\n-----END CERTIFICATE-----\n"


def credentialed_controller(sets: int, namespaces: int) -> tuple[Controller, CountingKube]:
    """`sets` sets of 2 available, credentialed instances with Pods, the token Secrets of
    Jumpstarter's controller and its CA ConfigMap in each namespace."""
    controller, kube = _controller(
        namespaces, {"resources": {"cpu": 2, "memory": "4Gi", "storage": "16Gi"}}
    )
    informers = controller.informers
    for n in range(namespaces):
        ns = f"ns-{n}"
        informers[CONFIGMAPS].apply(
            "ADDED",
            {
                "metadata": {"name": DEFAULT_CA_CONFIGMAP, "namespace": ns},
                "data": {DEFAULT_CA_KEY: CA_PEM},
            },
        )
    for s in range(sets):
        ns, name = f"ns-{s % namespaces}", f"pool{s}"
        set_obj = exporter_set(ns, name, warm=2, ceiling=4)
        set_obj["spec"]["template"]["spec"] = {
            "drivers": [
                {"name": "qemu", "type": "jumpstarter_driver_qemu.driver.Qemu"},
                {"name": "power", "ref": "qemu.power"},
            ]
        }
        informers[EXPORTERSETS].apply("ADDED", set_obj)
        for i in range(2):
            e = exporter(ns, name, set_obj["metadata"]["uid"], i, "available")
            token = f"{name}-{i}-token"
            e["status"]["credential"] = {"name": token}
            informers[EXPORTERS].apply("ADDED", e)
            informers[PODS].apply("ADDED", pod(ns, name, e))
            informers[SECRETS].apply(
                "ADDED",
                {
                    "metadata": {"name": token, "namespace": ns},
                    "data": {"token": base64.b64encode(b"t" * 600).decode()},
                },
            )
    return controller, kube


def bench_config_secrets() -> dict[str, float]:
    controller, kube = credentialed_controller(1000, 100)
    sets = controller.informers[EXPORTERSETS]
    keys = [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in sets.items()]

    # First pass: statuses and every config Secret are new; feed them back as a watch would.
    before = kube.calls
    _first_pass(controller, keys)
    first_writes = kube.calls - before
    secrets = [body for resource, body in kube.created if resource is SECRETS]
    for body in secrets:
        controller.informers[SECRETS].apply("ADDED", {**body, "metadata": {**body["metadata"]}})

    def full() -> None:
        for key in keys:
            controller.sync(key)

    before = kube.calls
    full_s = _median(full)
    steady_writes = (kube.calls - before) / RUNS
    with mock.patch.object(Executor, "keep_current", lambda self, names, token_only=(): 0):
        without_s = _median(full)
    return {
        "full_s": full_s,
        "without_s": without_s,
        "first_writes": first_writes,
        "config_secrets": len(secrets),
        "steady_writes": steady_writes,
    }


def bench_memory() -> tuple[float, float, float]:
    ns, name = "big", "pool"
    exporters = [exporter(ns, name, "set-big-pool", i, k) for i, k in enumerate(mix(10_000))]
    pods = [pod(ns, name, e) for e in exporters]
    wire = sum(len(json.dumps(o)) for o in exporters + pods)
    payload = [json.dumps(o) for o in exporters + pods]
    del exporters, pods
    gc.collect()
    tracemalloc.start()
    controller, _ = filled_controller(0, 0, 0)
    base = tracemalloc.get_traced_memory()[0]
    for text in payload:
        obj = json.loads(text)
        resource = EXPORTERS if obj["kind"] == "Exporter" else PODS
        controller.informers[resource].apply("ADDED", obj)
    cached = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    # The same objects kept as parsed, with managedFields (what a naive cache would hold).
    gc.collect()
    tracemalloc.start()
    naive = [json.loads(text) for text in payload]
    naive_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del naive
    return cached / 2**20, naive_bytes / 2**20, wire / 2**20


def headline() -> dict[str, float]:
    """The two figures a change of the reconciler's code must not slow down (seconds): the
    best of RUNS runs each, the measure least disturbed by other work on the machine."""
    _, plan_s, _ = bench_planner(pick=min)
    return {"planner_s": plan_s, "pass_s": bench_pass(pick=min)["full_s"]}


def _headline_of(tree: Path) -> dict[str, float]:
    """`headline()` of the code in `tree`, in a fresh interpreter (its packages first)."""
    code = "import json; from bench.reconciler import headline; print(json.dumps(headline()))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True
    ).stdout
    figures: dict[str, float] = json.loads(out.splitlines()[-1])
    return figures


def before_after(before: Path) -> str:
    """The headline figures of `before` and of this tree, alternating rounds."""
    trees = {"before": before, "after": REPO_ROOT}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(ROUNDS):
        for label, tree in trees.items():
            runs[label].append(_headline_of(tree))
    rows = []
    for key, what in (
        ("planner_s", "planner: one set of 10,000 exporters"),
        ("pass_s", "one full pass over 1,000 sets (10 exporters each)"),
    ):
        old, new = (min(r[key] for r in runs[t]) for t in trees)
        change = f"{new / old - 1:+.1%}"
        rows.append(f"| {what} | {old * 1000:.1f} ms | {new * 1000:.1f} ms | {change} |")
    return "\n".join(
        [
            f"Before ({before}) and after ({REPO_ROOT}), {ROUNDS} alternating rounds of each, "
            f"each a fresh interpreter taking the best of {RUNS} runs; the best round (on a "
            "shared machine the least disturbed):",
            "",
            "| measure | before | after | change |",
            "| --- | ---: | ---: | ---: |",
            *rows,
            "",
        ]
    )


def main() -> str:
    before = os.environ.get("VIRTUALTARGET_BENCH_BEFORE")
    compared = before_after(Path(before)) if before else ""
    observe_s, plan_s, actions = bench_planner()
    passes = bench_pass()
    cached_mb, naive_mb, wire_mb = bench_memory()
    configs = bench_config_secrets()
    rows = [
        (
            "planner: one set of 10,000 exporters",
            f"{plan_s * 1000:.1f} ms",
            "building its observation from raw objects",
            f"{observe_s * 1000:.1f} ms",
        ),
        (
            "one full pass over 1,000 sets (10 exporters each)",
            f"{passes['full_s'] * 1000:.0f} ms",
            "no-op pass (fetch each set from the cache)",
            f"{passes['noop_s'] * 1000:.1f} ms",
        ),
        (
            "cache memory at 10,000 exporters + 10,000 pods",
            f"{cached_mb:.1f} MiB",
            "same objects parsed as sent (managedFields kept); JSON size",
            f"{naive_mb:.1f} MiB; {wire_mb:.1f} MiB",
        ),
        (
            "API writes per steady-state pass (1,000 sets)",
            f"{passes['steady_writes']:.0f}",
            "first pass (every status new)",
            f"{passes['first_writes']:.0f}",
        ),
        (
            "one pass over 1,000 sets of 2 credentialed instances, config Secrets compared",
            f"{configs['full_s'] * 1000:.0f} ms",
            "the same pass without the config Secret comparison",
            f"{configs['without_s'] * 1000:.0f} ms",
        ),
        (
            "API writes of that pass, config Secrets in place",
            f"{configs['steady_writes']:.0f}",
            f"first pass ({configs['config_secrets']:.0f} config Secrets and every status new)",
            f"{configs['first_writes']:.0f}",
        ),
    ]
    lines = [
        "## reconciler (`python -m bench reconciler`)",
        "",
        f"Date {datetime.now(UTC):%Y-%m-%d}, command `.venv/bin/python -m bench reconciler`; "
        f"medians of {RUNS} runs, 2 shared cores. The 10,000-exporter set: 60% available, "
        "30% leased, 5% booting, 5% disabled, 50 pending Leases; plan has "
        f"{actions} step(s) (its status). The pass bench gives each set of 10 the same mix; "
        "caches derive the planner's views once per event, so a pass reads them ready-made.",
        "",
        "| measure | result | baseline | baseline result |",
        "| --- | ---: | --- | ---: |",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
        "",
        compared,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
