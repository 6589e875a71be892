"""The refill benchmark's baseline: our reconciler made to create ONE instance per pass.

Jumpstarter's own exporter-set controller creates one Exporter per reconcile and
requeues. To compare with that pace and nothing else, this runs `virtualtarget
reconcile` unchanged except that each plan keeps only its first CreateExporter step and,
when it dropped any, asks to be requeued after `REQUEUE` (the watch event of the
Exporter just created usually wakes the set sooner, as it would wake Jumpstarter's).

    python -m bench._one_per_pass reconcile --kubeconfig K --namespace NS ...
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime, timedelta
from unittest import mock

from pool.model.actions import CreateExporter
from pool.model.views import Observation
from pool.rules.planner import Plan, plan
from reconciler.runtime import controller

__all__ = ["REQUEUE", "one_create_per_pass", "planner"]

REQUEUE = timedelta(seconds=1)


def one_create_per_pass(result: Plan) -> Plan:
    """The plan with its CreateExporter steps cut to the first, requeued when cut."""
    creates = [a for a in result.actions if isinstance(a, CreateExporter)]
    if len(creates) <= 1:
        return result
    kept = tuple(a for a in result.actions if not isinstance(a, CreateExporter) or a is creates[0])
    requeue = min(result.requeue_after or REQUEUE, REQUEUE)
    return dataclasses.replace(result, actions=kept, requeue_after=requeue)


def planner(observation: Observation, now: datetime) -> Plan:
    return one_create_per_pass(plan(observation, now))


def main(argv: list[str]) -> int:
    from virtualtarget.cli import main as cli

    with mock.patch.object(controller, "plan", planner):
        result: int = cli(argv)
        return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
