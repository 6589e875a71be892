"""What `virtualtarget plan` prints: each set's buckets, desired count, steps and waits,
as text or as JSON. Pure (the CLI reads the cluster and prints).

The JSON shape (`-o json`) is `JSON_SHAPE`, which `virtualtarget plan --help` prints:
stable, keys may be added, none renamed or removed. `verb` is one of
`pool.rules.explain.VERBS`; `at` is set on a step held back until then (a scale-down
in its cooldown); `names` is empty for pool-wide steps and waits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pool.model.timefmt import format_time
from pool.model.views import ProvisionedView
from pool.rules.buckets import Bucket
from pool.rules.demand import Estimate
from pool.rules.explain import explain
from pool.rules.planner import Plan

__all__ = ["JSON_SHAPE", "SetPlan", "as_json", "as_text"]

JSON_SHAPE = """\
{
  "now": "2026-01-01T12:00:00Z",        # the moment the plans are made for
  "provisioner": "qemu.jumpstarter.dev",
  "sets": [                             # sorted by namespace, then name
    {
      "namespace": "lab",
      "name": "pool",
      "class": "qemu",
      "skipped": null,                  # or why this reconciler makes no plan for it
      "desired": 2,                     # null when skipped, as the next three
      "pendingLeases": 0,
      "buckets": {"terminating": 0, "failed": 0, "draining": 0, "busy": 0, "released": 0,
                  "available": 0, "provisioning": 0, "standby": 0, "lost": 0},
      "steps": [                        # taken now, then held back; [] when skipped
        {"verb": "create", "names": ["pool-*", "pool-*"],
         "reason": "warm buffer 2, available 0", "at": null}
      ],
      "awaiting": [                     # instances waiting for credentials
        {"name": "pool-2", "reason": "no status.credential and status.endpoint yet"}
      ],
      "demand": {                       # null unless warm-buffer: auto
        "warmBuffer": 3, "leasesPerMinute": 1.2, "bootP95Seconds": 150.0,
        "targetWaitSeconds": 0.0, "reason": "warm buffer 3 from demand: ..."
      },
      "outdated": [                     # instances of an earlier revision: what each waits for
        {"name": "pool-0", "waitsFor": "its lease: lease lab-1 must end"}
      ],
      "standby": null,                  # or {"name": "pool-x7k2p" (null while it is
                                        # created), "reason": ...}: the Exporter without
                                        # a Pod that keeps Leases pending
      "lostLeased": [                   # leased instances on a lost node, kept
        {"name": "pool-1", "node": "node-b", "lease": "lab-7"}
      ],
      "targetObjects": [                # each instance's objects on its target cluster
        {"instance": "pool-1", "kind": "VirtualMachine", "namespace": "vms",
         "name": "pool-1", "target": "lab/kubevirt-credentials",
         "failure": null}               # or why it can serve no lease
      ]
    }
  ]
}
"""


@dataclass(frozen=True, slots=True)
class SetPlan:
    """One set's plan (None and `skipped` saying why when this reconciler makes none)."""

    namespace: str
    name: str
    class_name: str
    result: Plan | None = None
    awaiting: Mapping[str, str] = field(default_factory=dict)  # instance -> why it waits
    skipped: str = ""
    # each instance's objects on its target cluster (`Provisioner.remote`), as observed
    elsewhere: Mapping[str, tuple[ProvisionedView, ...]] = field(default_factory=dict)


def _set_json(entry: SetPlan) -> dict[str, Any]:
    result = entry.result
    return {
        "namespace": entry.namespace,
        "name": entry.name,
        "class": entry.class_name,
        "skipped": entry.skipped or None,
        "desired": result.desired if result else None,
        "pendingLeases": result.pending_leases if result else None,
        "buckets": {b.value: result.buckets[b] for b in Bucket} if result else None,
        "steps": [step.as_json() for step in explain(result)] if result else [],
        "awaiting": [{"name": n, "reason": why} for n, why in entry.awaiting.items()],
        "demand": _demand_json(result.demand) if result and result.demand else None,
        "outdated": [{"name": n, "waitsFor": why} for n, why in result.outdated] if result else [],
        "standby": _standby_json(result.standby) if result else None,
        "lostLeased": [
            {"name": n, "node": node, "lease": lease} for n, node, lease in result.stranded
        ]
        if result
        else [],
        "targetObjects": [
            {
                "instance": name,
                "kind": view.resource.kind,
                "namespace": view.namespace,
                "name": view.name,
                "target": view.target,
                "failure": view.failure or None,
            }
            for name, views in entry.elsewhere.items()
            for view in views
        ],
    }


def _standby_json(standby: str) -> dict[str, Any] | None:
    """The standby Exporter kept after the pass: its name, or null while it is created."""
    if not standby:
        return None
    return {"name": None if standby == "+" else standby, "reason": STANDBY_WHY}


def _demand_json(sized: Estimate) -> dict[str, Any]:
    return {
        "warmBuffer": sized.buffer,
        "leasesPerMinute": round(sized.rate * 60, 4),
        "bootP95Seconds": sized.boot.total_seconds(),
        "targetWaitSeconds": sized.target.total_seconds(),
        "reason": sized.reason(),
    }


def as_json(entries: Sequence[SetPlan], now: datetime, provisioner: str) -> str:
    document = {
        "now": format_time(now),
        "provisioner": provisioner,
        "sets": [_set_json(entry) for entry in entries],
    }
    return json.dumps(document, indent=2)


def _set_text(entry: SetPlan) -> list[str]:
    title = f"{entry.namespace}/{entry.name}  class {entry.class_name}"
    result = entry.result
    if result is None:
        return [f"{title}  skipped: {entry.skipped}"]
    return [
        f"{title}  desired {result.desired}  pending leases {result.pending_leases}",
        *_labelled("buckets", [_buckets(result)]),
        *_labelled("steps", [str(step) for step in explain(result)]),
        *_labelled("awaiting", [f"{name}: {why}" for name, why in entry.awaiting.items()]),
        *(_labelled("demand", [result.demand.reason()]) if result.demand else []),
        *_outdated(result),
        *_standby(result),
        *_stranded(result),
        *_elsewhere(entry),
    ]


def _elsewhere(entry: SetPlan) -> list[str]:
    """The instances' objects on their target cluster: said only when there are some."""
    there = [_there(name, views) for name, views in entry.elsewhere.items()]
    return _labelled("target", there) if there else []


def _there(instance: str, views: tuple[ProvisionedView, ...]) -> str:
    """An instance's objects on its target cluster, each with its failure if any."""
    found = [
        f"{v.resource.kind} {v.namespace}/{v.name}" + (f" ({v.failure})" if v.failure else "")
        for v in views
    ]
    return f"{instance}: {', '.join(found)} on {views[0].target}'s cluster"


def _stranded(result: Plan) -> list[str]:
    """Leased instances on a lost node: said only when there are some."""
    kept = [
        f"{n} on node {node} serves lease {lease}: kept until the lease ends"
        for n, node, lease in result.stranded
    ]
    return _labelled("lost", kept) if kept else []


def _buckets(result: Plan) -> str:
    """Each bucket's count; `lost` only when an instance is (a rare state, said when it is)."""
    shown = [b for b in Bucket if b is not Bucket.LOST or result.buckets[b]]
    return ", ".join(f"{b.value} {result.buckets[b]}" for b in shown)


# Why a pool keeps a standby Exporter (`pool.rules.stages.standby`).
STANDBY_WHY = "no enabled instance: Leases pend on it, not end (Jumpstarter 0.9.0)"


def _standby(result: Plan) -> list[str]:
    if not result.standby:
        return []
    name = "being created" if result.standby == "+" else result.standby
    return _labelled("standby", [f"{name}: {STANDBY_WHY}"])


def _outdated(result: Plan) -> list[str]:
    """Instances of an earlier revision and what each waits for, while a rollout runs."""
    lines = [f"{name}: {why}" for name, why in result.outdated]
    return _labelled("outdated", lines) if lines else []


def _labelled(label: str, lines: list[str]) -> list[str]:
    """`label` before the first line (`none` when there is none), the rest under it."""
    return [f"  {label if i == 0 else '':<10}{line}" for i, line in enumerate(lines or ["none"])]


def as_text(entries: Sequence[SetPlan], where: str) -> str:
    """One block per set; `where` names the scope when there is no set ("namespace lab")."""
    if not entries:
        return f"no ExporterSets in {where}"
    return "\n\n".join("\n".join(_set_text(entry)) for entry in entries)
