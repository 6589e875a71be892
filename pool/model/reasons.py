"""The reasons of the ExporterSet's conditions and Events, each spelled once.

Jumpstarter's own exporter-set controller's reasons wherever the state or the event
means the same thing (its users' `kubectl wait --for=condition`, alerts and dashboards
keep working); a reason of this product's only where Jumpstarter has none. docs/conditions.md
says when each is set.
"""

from __future__ import annotations

# -- conditions: Jumpstarter's ----------------------------------------------------------
NO_REPLICAS_REQUIRED = "NoReplicasRequired"  # Available True: no warm instance wanted
MINIMUM_AVAILABLE = "MinimumReplicasAvailable"  # Available True: the warm buffer is met
MINIMUM_UNAVAILABLE = "MinimumReplicasUnavailable"  # Available False: it is short
CLASS_NOT_FOUND = "VirtualTargetClassNotFound"  # the set's class does not exist
PODS_STARTING = "PodsStarting"  # Progressing True: instances boot, a Pod is pending
REPLICAS_NOT_READY = "ReplicasNotReady"  # Progressing True: instances boot, not registered
ALL_READY = "AllReplicasReady"  # Progressing False: nothing to do
PODS_FAILING = "PodsFailing"  # Degraded True: instances fail before serving (backoff)
ALL_HEALTHY = "AllReplicasHealthy"  # Degraded False
AT_MAX = "AtMaxReplicas"  # ScalingLimited True: more wanted than maxReplicas
WITHIN_LIMITS = "WithinLimits"  # ScalingLimited False

# -- conditions: this product's (states Jumpstarter does not name) ----------------------
SCALING_UP = "ScalingUp"  # Progressing True: creating instances
SCALING_DOWN = "ScalingDown"  # Progressing True: removing a surplus after its cooldown
SCALE_DOWN_COOLDOWN = "ScaleDownCooldown"  # Progressing False: a surplus waits
WAITING_FOR_CREDENTIALS = "WaitingForCredentials"  # Progressing True: Jumpstarter's step
RECYCLING = "Recycling"  # Progressing True: served or finished instances leave
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"  # Available True: bindingMode
INVALID_PARAMETERS = "InvalidParameters"  # the merged parameters fail the provisioner
INVALID_SPEC = "InvalidSpec"  # a spec value the webhook would have refused
# Degraded True, and the Warning Event of each distinct failure: a step of the last pass
# failed (`reconciler.runtime.failures`)
RENDER_FAILED = "RenderFailed"  # an instance's objects could not be rendered
WRITE_REJECTED = "WriteRejected"  # the apiserver refused a write (4xx)
# the target cluster of a provisioner (`Provisioner.remote`) was not reached or refused
TARGET_FAILED = "TargetFailed"
STEP_FAILURES = (RENDER_FAILED, WRITE_REJECTED, TARGET_FAILED)
# Degraded True: instances are on lost nodes (`pool.model.nodes`), one of them leased
INSTANCES_LOST = "InstancesLost"

# -- Events: Jumpstarter's --------------------------------------------------------------
SCALE_UP = "ScaleUp"  # an Exporter created
SCALE_DOWN = "ScaleDown"  # a surplus instance removed
RECYCLE = "Recycle"  # a served, finished or failed instance removed
POD_CREATED = "PodCreated"  # an instance's Pod created
# A condition turned True / False (`pool.rules.transitions`)
SET_AVAILABLE, SET_UNAVAILABLE = "ExporterSetAvailable", "ExporterSetUnavailable"
SET_PROGRESSING, SET_SETTLED = "ExporterSetProgressing", "ExporterSetSettled"
SET_DEGRADED, SET_RECOVERED = "ExporterSetDegraded", "ExporterSetRecovered"
SCALING_LIMITED, SCALING_UNLIMITED = "ScalingLimited", "ScalingUnlimited"

# -- Events: this product's -------------------------------------------------------------
RETAINED = "InstanceRetained"  # reclaimPolicy Retain detached an instance
FENCE_LIFTED = "FenceLifted"  # a Lease took an instance before its removal
# The standby Exporter (`pool.rules.stages.standby`): made, made an instance, deleted.
STANDBY_CREATED = "StandbyCreated"
STANDBY_PROMOTED = "StandbyPromoted"
STANDBY_REMOVED = "StandbyRemoved"
BACK_OFF = "BackOff"  # a step of the backoff of a failing pool (Warning)
WARM_BUFFER_CHANGED = "WarmBufferChanged"  # `warm-buffer: auto` sized the buffer anew
# Lease protection (`pool.rules.protection`), on the Exporter when its set is gone:
# An instance's node is lost (`pool.model.nodes`): an idle one removed, a leased one kept
# until its lease ends (Warning, naming the node and the lease).
NODE_LOST = "NodeLost"
INSTANCE_KEPT = "InstanceKept"  # a deleted instance stays until its lease ends
INSTANCE_RELEASED = "InstanceReleased"  # its lease ended (or the bound ran out): it goes
INSTANCE_LOST = "InstanceLost"  # deleted while leased, before it was protected (Warning)

# -- rollouts (`pool.rules.stages.rollout`): this product's ------------------------
ROLLING_OUT = "RollingOut"  # Progressing True: outdated instances are being replaced
ROLLOUT_PAUSED = "RolloutPaused"  # Progressing False: the set's rollout annotation holds it
ROLLOUT_STARTED = "RolloutStarted"  # Event: instances of an earlier revision found
ROLLOUT_COMPLETE = "RolloutComplete"  # Event: every instance on the current revision
