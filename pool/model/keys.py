"""Names of the labels and annotations the reconciler writes on the objects it manages,
and the labels and name prefix of a pool's instances.

One module so the planner, the renderer, the runtime and the tests agree on spelling.
Where Jumpstarter's own exporter-set controller has a key for the same thing, it is that
key (JUMPSTARTER_SET_GROUP), so its users' selectors, dashboards and a pool it filled keep
working; a key of this product's group only where Jumpstarter has none.
"""

from __future__ import annotations

from collections.abc import Mapping

from api.rollout import ROLLOUT as _ROLLOUT
from api.rollout import ROLLOUT_PAUSED as _ROLLOUT_PAUSED

__all__ = [
    "BACKOFF",
    "BACKOFF_STEP",
    "DEMAND",
    "FENCED_AT",
    "FENCED_FOR",
    "GROUP",
    "INSTANCE_LABEL",
    "JUMPSTARTER_SET_GROUP",
    "LEASE_PROTECTION",
    "LEGACY_SURPLUS_SINCE",
    "NAME_LABEL",
    "RETAINED_FROM",
    "REVISION",
    "ROLLOUT",
    "ROLLOUT_PAUSED",
    "SERVED_LEASE",
    "SET_LABEL",
    "SET_NAMESPACE_LABEL",
    "STANDBY_LABEL",
    "SURPLUS_SINCE",
    "generate_name",
    "instance_labels",
    "instance_selector",
]

GROUP = "virtualtarget.jumpstarter.dev"
JUMPSTARTER_SET_GROUP = "exporterset.jumpstarter.dev"  # Jumpstarter's exporter-set controller

# On Exporters: the ExporterSet an instance belongs to (Jumpstarter's Exporters carry only
# the template's labels; the webhook's objectSelector and the default status selector
# use this one).
SET_LABEL = f"{GROUP}/exporterset"
# On an Exporter the pool keeps without a Pod, so that Jumpstarter 0.9.0's lease controller
# always sees an enabled Exporter matching a Lease the pool could serve: it ends a Lease at
# once when none matches (NoAccess) or all that match are disabled (AllDisabled), and pends
# it (Offline) on one that is not online (`pool.rules.stages.standby`). Value "true";
# removed when the pool gives the standby its Pod.
STANDBY_LABEL = f"{GROUP}/standby"
# On every instance Pod and config Secret: the set (Jumpstarter's key; selects the Pods).
NAME_LABEL = f"{JUMPSTARTER_SET_GROUP}/name"
# Beside NAME_LABEL, on each object a provisioner makes for one instance beyond its
# Exporter, Pod and Secrets (`Provisioner.watches`): the instance, by its Exporter's name.
# Jumpstarter has no such key in a release (its KubeVirt provisioner, still under review,
# labels its VirtualMachines `jumpstarter.dev/exporter`), so it is this product's.
INSTANCE_LABEL = f"{GROUP}/instance"
# Beside NAME_LABEL and INSTANCE_LABEL, on each object an instance has on a target
# cluster (`Provisioner.remote`): the namespace of its set, which that cluster's own
# namespaces do not say.
SET_NAMESPACE_LABEL = f"{GROUP}/namespace"

# On the ExporterSet: since when the pool has had more capacity than it needs (RFC 3339,
# UTC), Jumpstarter's key, so a takeover keeps a cooldown that is running. An annotation
# rather than a status field: it is controller memory that cannot be re-observed from the
# world, and status may be dropped (backup restore, status wipe), which would silently
# restart the cooldown.
SURPLUS_SINCE = f"{JUMPSTARTER_SET_GROUP}/surplus-since"
# Where earlier versions of this product kept it: still read, cleared with the other.
LEGACY_SURPLUS_SINCE = f"{GROUP}/surplus-since"

# On an Exporter: the first Lease seen on it. Lets ExitAndReplace and Retain recognise a
# released instance even when the exporter does not record its lease hooks.
SERVED_LEASE = f"{GROUP}/served-lease"
# On an Exporter: set together with `spec.enabled=false` when the pool fences it for
# removal, so an instance an administrator disabled for maintenance is left alone.
FENCED_AT = f"{GROUP}/fenced-at"
# Written with FENCED_AT: the Event reason and the why of the removal it was fenced for
# ("Recycle: served lease lab-1; ..."). The delete comes a later pass, once the fence
# has settled (`pool.rules.stages.settle`), and says the same.
FENCED_FOR = f"{GROUP}/fenced-for"
# On an Exporter detached by reclaimPolicy Retain: the set it came from.
RETAINED_FROM = f"{GROUP}/retained-from"
# On an Exporter and its Pod: how many instances of the pool had failed in a row when it
# was created (0 for a healthy pool): its failure is failure step + 1 in a row.
BACKOFF_STEP = f"{GROUP}/backoff-step"
# On the ExporterSet (or, in a namespaced install, on its memory Lease): the backoff of a
# failing pool, as JSON: failures in a row, when the last ended, which instance and its
# last words, the revision they were rendered from (`pool.rules.backoff`). Memory,
# like SURPLUS_SINCE: it outlives the failed instances, a restart and a change of leader.
BACKOFF = f"{GROUP}/backoff"
# On the ExporterSet (or its memory Lease): what a pool with `warm-buffer: auto` has
# learned of its demand, as JSON (`pool.model.demand`). Memory, like BACKOFF.
DEMAND = f"{GROUP}/demand"
# On an Exporter: the revision of the set's spec and class it was rendered from
# (`pool.model.adapt.revision`). A failure of an earlier revision is no reason to
# wait: the backoff counts only failures of the current one, so a fixed pool fills at
# once.
REVISION = f"{GROUP}/revision"
# On the ExporterSet: `paused` holds the replacement of outdated instances
# (`pool.rules.stages.rollout`); spelled in `api.rollout`, which the webhook reads.
ROLLOUT, ROLLOUT_PAUSED = _ROLLOUT, _ROLLOUT_PAUSED
# A finalizer on an Exporter while it serves a lease (as `kubernetes.io/pvc-protection` on
# a PersistentVolumeClaim in use): deleting its set, or the Exporter itself, leaves it
# terminating but serving until the lease ends; then the reconciler takes the finalizer
# off and the garbage collector removes it with its Pod and Secrets
# (`pool.rules.protection`).
LEASE_PROTECTION = f"{GROUP}/lease-protection"


def instance_labels(pool_name: str, template_labels: Mapping[str, str]) -> dict[str, str]:
    """The labels every instance carries: the template's plus the one naming the set."""
    return {**template_labels, SET_LABEL: pool_name}


def instance_selector(set_name: str) -> str:
    """The label selector of a set's instances: its Exporters less its standby, which has
    no Pod and is no instance until it is promoted."""
    return f"{SET_LABEL}={set_name},!{STANDBY_LABEL}"


def generate_name(set_name: str) -> str:
    """The generateName prefix of a set's instances (the apiserver adds 5 characters)."""
    return f"{set_name}-"
