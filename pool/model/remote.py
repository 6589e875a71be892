"""An instance whose objects on a target cluster (`Provisioner.remote`) have failed, as
the planner sees it: its Pods failed, so that every rule of failed Pods holds for it
(replaced under the pool's backoff, never while a lease holds it, counted in
`podsFailed`, quoted in the status). Its exporter may still run: it drives a
VirtualMachine that cannot boot, or that is gone. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pool.model.access import Resource
from pool.model.views import PodView, ProvisionedView

__all__ = ["FAILED_EXIT", "remote_failure", "with_remote_failures"]

# The exit code the planner reads for such a Pod: a failure whether or not the exporter
# had registered (`pool.rules.backoff.failed`), since a new Pod alone would not mend it.
FAILED_EXIT = 1


def remote_failure(
    instance: str, views: tuple[ProvisionedView, ...], required: Resource | None, watched: bool
) -> str:
    """Why the instance's objects there serve nothing, "" while they can: one reports a
    failure, or (the target's cache `watched` in full) the object every instance has
    (`required`) is not there."""
    for view in views:
        if view.failure:
            return view.failure
    if watched and required is not None and not any(v.resource == required for v in views):
        return f"{required.kind} {instance} is not on the target cluster"
    return ""


def with_remote_failures(
    pods: tuple[PodView, ...],
    provisioned: Mapping[str, tuple[ProvisionedView, ...]],
    required: Resource | None,
    watched: bool,
) -> tuple[PodView, ...]:
    """`pods`, those of an instance whose objects there failed seen as failed Pods with
    the reason as their message; Pods that ended or are going stay as they are."""
    seen = []
    for pod in pods:
        why = (
            ""
            if pod.done or pod.going
            else remote_failure(pod.exporter, provisioned.get(pod.exporter, ()), required, watched)
        )
        seen.append(
            replace(pod, phase="Failed", exited=True, exit_code=FAILED_EXIT, message=why)
            if why
            else pod
        )
    return tuple(seen)
