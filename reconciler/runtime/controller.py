"""The runtime loop: caches feed a keyed work queue, each key gets a pass.

A pass (`Controller.sync`) over one ExporterSet reads as a sequence, each step a module
of its own, as Kubernetes' ReplicaSet controller reads:

1. look after the instances the set left behind (`reconciler.runtime.leftovers`: lease
   protection of those it no longer controls);
2. observe: the planner's input from the caches, through their indexes, so a pass costs
   the size of the pool, not of the cluster (`reconciler.runtime.observe`);
3. plan: the pure planner (`pool.rules.planner`);
4. carry out the steps of the pass's lane (`reconciler.runtime.lanes`) with the executor
   (`reconciler.runtime.executor`);
5. keep the running instances' config Secrets current;
6. report: the status and Events, after the work, and a log of the steps carried out
   (`reconciler.runtime.report`); a step that fails for good still gets its pass's
   status written (`reconciler.runtime.failures`).

The pass is requeued at the next cooldown deadline the planner reports; failures back off
per key. Which keys each watch event wakes is `reconciler.runtime.routing`'s; the caches
are made and indexed once (`reconciler.runtime.caches`); what every pass works with is one
`Runtime` value, what one pass is about one `Pass` (`reconciler.runtime.executor`).

`virtualtarget plan` uses the same pieces read-only: `snapshot` fills the caches with
one list each (no watch), and `decide` is the observing and planning half of `sync`.

Scope (`reconciler.runtime.scope`): the caches cover one namespace, a list, or the
cluster; in a cluster-wide install Secrets are read by name (`reconciler.runtime.named`,
`reconciler.runtime.credentials`). In a namespaced install the pool's memory (cooldown,
backoff) is a Lease beside each set (`reconciler.runtime.memory`).

Provisioner: a set is handled when its class names this process's provisioner, or when its
class is missing (then only its status is written, saying so; every reconciler writes
the same words, so several provisioners never flap over it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from api.access import NAMESPACED
from api.imagepolicy import ImagePolicy
from pool.model.access import (
    CLASSES,
    EXPORTERS,
    EXPORTERSETS,
    JUMPSTARTER_LEASES,
    provisioned_access,
)
from pool.model.views import Observation
from pool.rendering.configsync import ConfigSync
from pool.rendering.provisioners.base import Provisioner
from pool.rules.planner import Plan, plan
from reconciler.runtime.cache import ObjKey
from reconciler.runtime.caches import build_caches
from reconciler.runtime.claims import Claims
from reconciler.runtime.credentials import InstanceCredentials
from reconciler.runtime.eventsender import EventSender
from reconciler.runtime.executor import Executor, Pass, Runtime
from reconciler.runtime.expectations import Expectations
from reconciler.runtime.failures import StepFailed
from reconciler.runtime.kube import ApiError, Kube
from reconciler.runtime.lanes import LANE_STEPS, Lane, lane_work
from reconciler.runtime.leftovers import Leftovers
from reconciler.runtime.memory import MemoryLeases
from reconciler.runtime.metrics import ReconcileStats
from reconciler.runtime.named import DEFAULT_BUDGET, DEFAULT_RESYNC
from reconciler.runtime.observe import Observed, Observer
from reconciler.runtime.remotecleanup import RemoteCleanup
from reconciler.runtime.report import log_pass, report
from reconciler.runtime.routing import Router, set_key
from reconciler.runtime.scope import Scope
from reconciler.runtime.targets import Targets, targets_of
from reconciler.runtime.workqueue import WorkQueue

__all__ = ["LANE_STEPS", "Controller", "Lane", "Observed"]

log = logging.getLogger("reconciler.controller")  # stable: log filters select by it


class Controller:
    def __init__(
        self,
        kube: Kube,
        provisioner: Provisioner,
        namespace: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        workers: int = 2,
        *,
        image_policy: ImagePolicy | None = None,
        scope: Scope | None = None,
        secret_resync: float = DEFAULT_RESYNC,
        secret_budget: float = DEFAULT_BUDGET,
    ) -> None:
        """`scope` (default: `namespace` alone, else the cluster) is what the caches
        cover. A cluster-wide install's safety resync of the Secrets it reads by name
        reads at most `secret_budget` a second in all, none more often than every
        `secret_resync` seconds. `image_policy`: the administrator's allow-list (None:
        any image)."""
        self.kube, self.provisioner, self.clock, self.workers = kube, provisioner, clock, workers
        self.scope = scope or (Scope((namespace,)) if namespace else Scope())
        # the calls the access table grants in this scope, and on the provisioner's own objects
        kube.mode, kube.provisioned = self.scope.mode, provisioned_access(provisioner.watches)
        self.queue: WorkQueue[ObjKey] = WorkQueue()
        self.events = EventSender(kube)  # started by `run`; until then a pass sends its own
        self.configs = ConfigSync()
        self.expectations = Expectations()
        self.reconciles = ReconcileStats()
        # The last plan of each set handled, for the pool metrics; a set that is gone, or
        # is not this provisioner's, has none.
        self.plans: dict[ObjKey, Plan] = {}
        self._pass_writes = 0
        self._caches_started = False
        caches = build_caches(kube, self.scope, secret_resync, secret_budget, provisioner.watches)
        self.watches, self.secrets = caches.watches, caches.secrets
        self.informers = caches.informers
        # Where the pools' memory lives when the set itself may not be written.
        self.memory = MemoryLeases(kube) if self.scope.mode == NAMESPACED else None
        claims = Claims(self.watches[JUMPSTARTER_LEASES])
        self.claims = claims.index  # the namespace's sets as the claim rule sees them
        self.credentials = InstanceCredentials(self.watches, self.secrets)
        # where its instances live beyond this cluster: a change there wakes its set
        self.targets, self.remote_cleanup = self._remote_parts()
        self.leftovers = Leftovers(
            kube, self.watches[EXPORTERSETS], self.watches[EXPORTERS], claims, self.queue
        )
        self.observer = Observer(
            provisioner,
            self.watches,
            claims,
            self.credentials,
            self.expectations,
            self.plans,
            live=kube,
            memory=self.memory,
            image_policy=image_policy,
            targets=self.targets,
        )
        self.runtime = Runtime(
            kube,
            provisioner,
            exporters=self.watches[EXPORTERS],
            secrets=self.secrets,
            expectations=self.expectations,
            configs=self.configs,
            memory=self.memory,
            events=self.events,
            targets=self.targets,
        )
        Router(
            self.queue,
            caches,
            claims,
            self.credentials,
            plans=self.plans,
            expectations=self.expectations,
            configs=self.configs,
            memory=self.memory,
            lost=self.leftovers,
        ).subscribe()

    def _remote_parts(self) -> tuple[Targets | None, RemoteCleanup | None]:
        """A provisioner with a `remote` part: its target clusters, the sets' finalizer."""
        targets = targets_of(self.kube, self.provisioner.remote, self.queue.add)
        if targets is None:
            return None, None
        exporters = self.watches[EXPORTERS]
        mode = self.scope.mode
        return targets, RemoteCleanup(self.kube, self.provisioner.name, targets, exporters, mode)

    @property
    def writes(self) -> int:
        """The API writes the passes made (Events included)."""
        return self._pass_writes + self.leftovers.writes

    # -- one pass --------------------------------------------------------------------------
    def sync(self, key: ObjKey, lane: Lane = Lane.ORDINARY) -> Plan | None:
        """One pass over the set; in a lane above the ordinary one it carries out only the
        steps that lane is for (the rest of the pass is left to an ordinary one). It logs
        the steps it carried out, and what it holds back (an ordinary pass).

        A step that fails for good (`reconciler.runtime.failures`) ends the pass's work,
        but not its report: the pass is planned again with the failure, and that plan's
        status and Events are written; then StepFailed goes to the worker, which retries
        under the queue's backoff (a retry that fails the same way writes nothing more)."""
        now = self.clock()
        exporter_set = self.leftovers.look_after(key, now)  # what a deleted set left
        if self.targets is not None:  # and what its removed instances left there
            self._pass_writes += self.targets.sweep(key, self.watches[EXPORTERS])
        if self.remote_cleanup and exporter_set is not None:
            klass = self.watches[CLASSES].get(key[0], _class_name(exporter_set))
            self._pass_writes += self.remote_cleanup.look_after(exporter_set, klass)
        observed = self.observer.observe(exporter_set) if exporter_set is not None else "gone"
        if exporter_set is None or isinstance(observed, str):  # gone, or not this process's
            self.plans.pop(key, None)  # its metric series go with it
            return None
        result = self.plans[key] = plan(observed.observation, now)
        ordinary = lane == Lane.ORDINARY
        work = lane_work(result, lane)
        credentials = self.credentials.for_pass(key[0], observed.klass, observed.credentials, work)
        executor = Executor(self.runtime, Pass(exporter_set, observed.klass, now, credentials))
        try:
            try:
                executor.run(work)  # carry out the lane's steps
                if ordinary:
                    executor.keep_current(result.keep_current, result.keep_token)
                    executor.run(report(result))  # status and Events, after the work
            finally:
                self._pass_writes += executor.writes
                log_pass(key, executor.done, result.waits if ordinary else ())
        except StepFailed as failed:
            self._report_failure(key, observed.observation, failed, executor, now)
            raise
        return result

    def decide(self, exporter_set: dict[str, Any], now: datetime) -> tuple[Plan, Observed] | str:
        """The plan for one set at `now`, with what it was made from; or, when the set
        gets no plan from this process, why."""
        observed = self.observer.observe(exporter_set)
        if isinstance(observed, str):
            return observed
        return plan(observed.observation, now), observed

    def _report_failure(
        self,
        key: ObjKey,
        observation: Observation,
        failed: StepFailed,
        executor: Executor,
        now: datetime,
    ) -> None:
        """Write the status and Events of the pass planned again with its failed step."""
        log.warning("%s/%s: %s failed: %s", *key, failed.failure.step, failed.failure.message)
        result = self.plans[key] = plan(replace(observation, failure=failed.failure), now)
        executor.done.clear()
        try:
            executor.run(report(result))
        finally:
            self._pass_writes += executor.writes
            log_pass(key, executor.done, ())

    # -- running -------------------------------------------------------------------------
    def snapshot(self) -> None:
        """Fill every cache with one list and no watch: the cluster as it is now, read
        only. A resource that is not served reads as empty, as in `run` (Jumpstarter's
        Lease CRD may be absent), except the ExporterSets themselves."""
        for informer in self.informers.values():
            try:
                informer.relist()
            except ApiError as exc:
                if exc.status != 404 or informer.resource == EXPORTERSETS:
                    raise

    def _worker(self) -> None:
        while (taken := self.queue.take()) is not None:
            key, lane = taken
            started = time.monotonic()
            try:
                # A higher lane's pass, then the rest in its turn (`reconciler.runtime.lanes`).
                result = self.sync(key, Lane(lane))
                if lane != Lane.ORDINARY:
                    self.queue.add(key)
                self.queue.forget(key)
                again = result.requeue_after if result is not None else None
                self.queue.replan(key, again.total_seconds() + 0.5 if again is not None else None)
                outcome = "success" if again is None else "requeue_after"
            except Exception as exc:
                outcome = "error"
                delay = self.queue.add_rate_limited(key)
                log.warning("%s/%s: %s (retry in %.1fs)", *key, exc, delay)
            finally:
                self.queue.done(key)
            self.reconciles.record(outcome, time.monotonic() - started)

    def start_caches(self, stop: threading.Event) -> None:
        """Start every list-and-watch loop (once): a standby fills its caches too, so it
        is ready, and takes over from warm caches."""
        if self._caches_started:
            return
        self._caches_started = True
        if self.targets is not None:
            self.targets.start(stop)
        for informer in self.informers.values():
            threading.Thread(
                target=informer.run, args=(stop,), daemon=True, name=informer.resource.plural
            ).start()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers.values())

    def stalled(self, bound: float) -> list[str]:
        """The resources whose list-and-watch loop has not heard from the apiserver for
        more than `bound` seconds (or has ended): what the liveness probe reports."""
        if not self._caches_started:
            return []
        return sorted(
            r.plural for r, informer in self.informers.items() if informer.stalled_for() > bound
        )

    def run(self, stop: threading.Event) -> None:
        """Fill the caches, then reconcile until `stop`; finishes the passes in flight."""
        self.start_caches(stop)
        for informer in self.informers.values():
            while not informer.synced.wait(0.2):
                if stop.is_set():
                    return
        for exporter_set in self.watches[EXPORTERSETS].items():
            # Leading from caches that may lag the last leader's creates: read live once.
            self.expectations.doubt(set_key(exporter_set))
            self.queue.add(set_key(exporter_set))
        self.events.start(stop)
        threads = [
            threading.Thread(target=self._worker, name=f"worker-{i}") for i in range(self.workers)
        ]
        for thread in threads:
            thread.start()
        log.info("reconciling (%s)", self.provisioner.name)
        stop.wait()
        self.queue.close()
        for thread in threads:
            thread.join()


def _class_name(exporter_set: dict[str, Any]) -> str:
    return str((exporter_set.get("spec") or {}).get("virtualTargetClassName", ""))
