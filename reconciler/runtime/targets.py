"""The target clusters of a provisioner whose instances live beyond this cluster
(`Provisioner.remote`: KubeVirt's VirtualMachines and their Services).

A set's target is the cluster reached with the kubeconfig in its class's credentials
Secret, in the namespace its merged parameters name (`Remote.target`). For each Secret
version a client is made, as Jumpstarter's pull request #927 keeps one per
namespace/name/resourceVersion (remote.go:82-125); the Secret is read live, again at most
every `recheck` seconds, so a rotated kubeconfig is picked up without a watch of
Secrets. For each target namespace a list-and-watch cache per resource of `Remote`,
selected by the labels every such object carries here (`SET_NAMESPACE_LABEL`,
`NAME_LABEL`, `INSTANCE_LABEL`), feeds the set's passes (`observe`) and wakes the set on
every change of its objects.

What a pass does there: `ensure` creates the instance's objects before its Pod (the VM,
then its Services once the VM's uid is known), adopting one of that name that #927's
labels give to the same Exporter (a takeover); `delete` removes one; `sweep` removes
those whose Exporter is gone (an instance removed while the target was unreachable, or a
deleted set's). Every call is checked against what the target's kubeconfig is granted
(`ACCESS`): nothing beyond the objects of `Remote.resources`.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import yaml
from kubernetes import config
from kubernetes.config.config_exception import ConfigException

from api.access import NAMESPACED
from pool.model.access import SECRETS, Resource, target_access
from pool.model.keys import INSTANCE_LABEL, NAME_LABEL, SET_NAMESPACE_LABEL
from pool.model.views import ProvisionedView
from pool.rendering.provisioners.base import Remote, TargetRef
from pool.rendering.render import InstanceContext
from reconciler.runtime.cache import Cache, Informer, ObjKey, keep_only, meta_of
from reconciler.runtime.kube import ApiError, Kube

__all__ = ["TargetError", "Targets", "targets_of"]

log = logging.getLogger("reconciler.targets")  # stable: log filters select by it

Obj = dict[str, Any]
_SELECTOR = f"{SET_NAMESPACE_LABEL},{NAME_LABEL},{INSTANCE_LABEL}"


class TargetError(Exception):
    """The target cannot be reached or refused a call; the message says which and why."""


@dataclass
class _Target:
    """One client of a target cluster (one credentials Secret version) and its caches."""

    name: str  # "<namespace>/<secret>": the Secret it was made from
    kube: Kube
    version: str  # the Secret's resourceVersion
    checked: float  # time.monotonic() of the Secret's last read
    stop: threading.Event = field(default_factory=threading.Event)
    caches: dict[tuple[str, Resource], Informer] = field(default_factory=dict)


class Targets:
    def __init__(
        self,
        kube: Kube,
        remote: Remote,
        wake: Callable[[ObjKey], None],
        recheck: float = 60.0,
    ) -> None:
        """`kube` reads the credentials Secrets; `wake` queues a set's pass."""
        self.kube, self.remote, self.wake, self.recheck = kube, remote, wake, recheck
        self._targets: dict[tuple[str, str], _Target] = {}
        self._lock = threading.RLock()
        self._running: threading.Event | None = None  # None: read once, no watch (`plan`)

    # -- reaching ------------------------------------------------------------------------
    def start(self, stop: threading.Event) -> None:
        """From now on every cache lists and watches, until `stop`."""
        with self._lock:
            self._running = stop
            for target in self._targets.values():
                for informer in target.caches.values():
                    self._run(target, informer)
        threading.Thread(target=self._stop_all, args=(stop,), daemon=True).start()

    def _stop_all(self, stop: threading.Event) -> None:
        stop.wait()
        with self._lock:
            for target in self._targets.values():
                target.stop.set()

    def _client(self, namespace: str, ref: TargetRef) -> _Target:
        """The client of the Secret's current version (read again after `recheck`)."""
        key = (namespace, ref.secret)
        with self._lock:
            known = self._targets.get(key)
            if known is not None and time.monotonic() - known.checked < self.recheck:
                return known
            secret = self.kube.get(SECRETS, namespace, ref.secret)
            if secret is None:
                raise TargetError(
                    f"credentials Secret {namespace}/{ref.secret} not found (its key "
                    f'"{ref.key}" must hold the target cluster\'s kubeconfig)'
                )
            version = str(meta_of(secret).get("resourceVersion", ""))
            if known is not None and known.version == version:
                known.checked = time.monotonic()
                return known
            target = _Target(
                f"{namespace}/{ref.secret}",
                _kube_from(secret, ref.key, self.remote.resources),
                version,
                time.monotonic(),
            )
            target.kube.may_write = self._may_write
            if known is not None:
                known.stop.set()  # the older version's watches end
            self._targets[key] = target
            return target

    def _may_write(self) -> bool:
        check = self.kube.may_write
        return check is None or check()

    def _cache(self, target: _Target, namespace: str, resource: Resource) -> Informer:
        with self._lock:
            informer = target.caches.get((namespace, resource))
            if informer is not None:
                return informer
            informer = Informer(
                target.kube,
                resource,
                namespace,
                _SELECTOR,
                # a VM's state; a Service's address (`kubevirt_target.service_address`)
                transform=keep_only(
                    "status.printableStatus",
                    "status.loadBalancer",
                    "spec.type",
                    "spec.ports",
                    "spec.clusterIP",
                ),
                derive=partial(self._view, resource, target.name),
            )
            informer.add_index("set", _set_of)
            informer.add_handler(self._on_event)
            target.caches[(namespace, resource)] = informer
            if self._running is not None:
                self._run(target, informer)
        if self._running is None:
            informer.relist()  # `plan`: the target as it is now, read once
        return informer

    def _run(self, target: _Target, informer: Informer) -> None:
        name = f"{informer.resource.plural}@{target.name}"
        threading.Thread(target=informer.run, args=(target.stop,), daemon=True, name=name).start()

    def _view(self, resource: Resource, target: str, obj: Obj) -> ProvisionedView:
        meta = meta_of(obj)
        return ProvisionedView(
            resource=resource,
            name=str(meta.get("name", "")),
            instance=str((meta.get("labels") or {}).get(INSTANCE_LABEL, "")),
            uid=str(meta.get("uid", "")),
            deleting=bool(meta.get("deletionTimestamp")),
            namespace=str(meta.get("namespace", "")),
            target=target,
            failure=self.remote.failure(obj),
        )

    def _on_event(self, _kind: str, new: Obj, old: Obj | None) -> None:
        for obj in (new, old):
            if obj is not None:
                for key in _set_of(obj):
                    self.wake(key)

    # -- a pass's reads ------------------------------------------------------------------
    def observe(
        self, key: ObjKey, ref: TargetRef
    ) -> tuple[dict[str, tuple[ProvisionedView, ...]], bool]:
        """The set's objects there by instance, and whether every cache of its target
        has listed (a missing object then is gone, not unseen). Unreachable: none, and
        False (the pass's creates say why)."""
        try:
            target = self._client(key[0], ref)
        except (TargetError, ApiError) as exc:
            log.warning("%s/%s: target not reached: %s", *key, exc)
            return {}, False
        found: dict[str, list[ProvisionedView]] = {}
        synced = True
        for resource in self.remote.resources:
            informer = self._cache(target, ref.namespace, resource)
            synced = synced and informer.synced.is_set()
            for view in informer.derived_by_index("set", key):
                found.setdefault(view.instance, []).append(view)
        return {
            name: tuple(sorted(views, key=lambda v: (v.resource.plural, v.name)))
            for name, views in sorted(found.items())
        }, synced

    def objects_of(self, key: ObjKey, instance: str) -> dict[str, Obj]:
        """The instance's objects there as cached, by name (on every target known)."""
        with self._lock:
            caches = [c for t in self._targets.values() for c in t.caches.values()]
        return {
            str(meta_of(obj).get("name", "")): obj
            for informer in caches
            for obj in informer.by_index("set", key)
            if (meta_of(obj).get("labels") or {}).get(INSTANCE_LABEL) == instance
        }

    # -- a pass's writes -----------------------------------------------------------------
    def ensure(self, ctx: InstanceContext, ref: TargetRef) -> None:
        """The instance's objects there, created where missing: the first, then those it
        owns. TargetError when the target cannot be reached or refuses."""
        target = self._client(ctx.namespace, ref)
        labels = {
            SET_NAMESPACE_LABEL: ctx.namespace,
            NAME_LABEL: ctx.set_name,
            INSTANCE_LABEL: ctx.exporter,
        }
        (first,) = self.remote.objects(ctx, labels)
        owner = self._create_or_adopt(target, first, labels)
        for obj in self.remote.objects(ctx, labels, str(meta_of(owner).get("uid", ""))):
            self._create_or_adopt(target, obj, labels)

    def _create_or_adopt(self, target: _Target, body: Obj, labels: Mapping[str, str]) -> Obj:
        resource = _resource_of(self.remote.resources, body)
        meta = meta_of(body)
        namespace, name = str(meta["namespace"]), str(meta["name"])
        where = f"{resource.kind} {namespace}/{name} on {target.name}'s cluster"
        try:
            created = target.kube.create(resource, namespace, body)
        except ApiError as exc:
            if exc.status != 409:
                raise TargetError(f"create {where}: {exc}") from exc
        else:
            self._cache(target, namespace, resource).apply("ADDED", created)
            return created
        found = target.kube.get(resource, namespace, name)
        if found is None:
            raise TargetError(f"create {where}: it exists, then was gone; next pass")
        own = meta_of(found).get("labels") or {}
        theirs = {k: v for k, v in meta["labels"].items() if k not in labels}
        if any(own.get(k) != v for k, v in theirs.items()):
            raise TargetError(f"{where} exists and is not this instance's (labels {own})")
        if any(own.get(k) != v for k, v in labels.items()):  # #927 made it: take it over
            found = target.kube.patch(resource, namespace, name, {"metadata": {"labels": labels}})
        self._cache(target, namespace, resource).apply("MODIFIED", found)
        return found

    def delete(self, view: ProvisionedView) -> None:
        """Delete one object there (as a cache of `view.target` saw it), by uid where the
        view has one."""
        with self._lock:
            target = next((t for t in self._targets.values() if t.name == view.target), None)
        if target is None:
            raise TargetError(f"{view.resource.kind} {view.namespace}/{view.name}: target gone")
        try:
            target.kube.delete(view.resource, view.namespace, view.name, view.uid or None)
        except ApiError as exc:
            if exc.status != 409:  # the precondition: a newer object took the name
                where = f"{view.resource.kind} {view.namespace}/{view.name}"
                raise TargetError(f"delete {where}: {exc}") from exc

    def sweep(
        self, key: ObjKey, exporters: Cache, keep: Callable[[str], bool] | None = None
    ) -> int:
        """Delete the set's objects there, on every target known, but those of instances
        `keep` names (default: whose Exporter is in the synced cache of `exporters`: a
        removal deletes them first; this takes what one missed, and a deleted set's); how
        many were deleted."""
        if not exporters.synced.is_set():
            return 0
        if keep is None:
            keep = partial(_exists, exporters, key[0])
        with self._lock:
            caches = [c for t in self._targets.values() for c in t.caches.values()]
        gone = 0
        for informer in caches:
            if not informer.synced.is_set():
                continue
            for view in informer.derived_by_index("set", key):
                if not view.deleting and not keep(view.instance):
                    self.delete(view)
                    gone += 1
        return gone


def targets_of(kube: Kube, remote: Remote | None, wake: Callable[[ObjKey], None]) -> Targets | None:
    """The target clusters of a provisioner with a `remote` part; None for one without."""
    return Targets(kube, remote, wake) if remote is not None else None


def _exists(exporters: Cache, namespace: str, instance: str) -> bool:
    return exporters.get(namespace, instance) is not None


def _set_of(obj: Obj) -> list[tuple[str, str]]:
    labels = meta_of(obj).get("labels") or {}
    namespace, name = labels.get(SET_NAMESPACE_LABEL), labels.get(NAME_LABEL)
    return [(namespace, name)] if namespace and name else []


def _resource_of(resources: tuple[Resource, ...], body: Obj) -> Resource:
    return next(r for r in resources if r.kind == body.get("kind"))


def _kube_from(secret: Obj, key: str, resources: tuple[Resource, ...]) -> Kube:
    """A client from the kubeconfig in `key` of the Secret, allowed only the calls on
    `resources` (`target_access`)."""
    where = f"credentials Secret {meta_of(secret).get('namespace')}/{meta_of(secret).get('name')}"
    data = secret.get("data") or {}
    if key not in data:
        raise TargetError(f'{where} has no key "{key}" (the target cluster\'s kubeconfig)')
    encoded = data[key]
    if not encoded:
        raise TargetError(f'{where}: key "{key}" is empty (the target cluster\'s kubeconfig)')
    try:
        loaded = yaml.safe_load(base64.b64decode(encoded))
        client = config.new_client_from_config_dict(loaded)  # type: ignore[no-untyped-call]
    except (binascii.Error, yaml.YAMLError, ConfigException, TypeError, AttributeError) as exc:
        detail = " ".join(str(exc).split())
        raise TargetError(f'{where}: key "{key}" is not a kubeconfig ({detail})') from None
    kube = Kube(client, mode=NAMESPACED)
    kube.provisioned = target_access(resources)
    return kube
