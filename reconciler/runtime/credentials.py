"""The credentials of a pool's instances, from the cached Secrets and ConfigMaps, and the
Secrets kept current for them.

Worked out once per pass, when it observes the pool (`reconciler.runtime.observe`), and
for an instance whose Pod the pass creates once more, from its two Secrets read right
before (`for_pass`). In a cluster-wide install Secrets are read by name
(`reconciler.runtime.named`): `track` names the two Secrets of each credentialed
instance to that cache as its Exporter's events come.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pool.model.access import CONFIGMAPS, EXPORTERS, EXPORTERSETS
from pool.model.actions import Action, CreatePod
from pool.model.adapt import controller_of
from pool.model.jumpstarter import config_secret_name
from pool.rendering.credentials import credential_secret_name, resolve
from pool.rendering.render import Credentials
from reconciler.runtime.cache import Cache, Informer, key_of, meta_of
from reconciler.runtime.named import NamedCache

__all__ = ["InstanceCredentials", "owner_sets"]

Obj = dict[str, Any]


def owner_sets(obj: Obj) -> Iterable[tuple[str, str]]:
    """The set that controls `obj`, if one does."""
    for ref in meta_of(obj).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == EXPORTERSETS.kind:
            yield meta_of(obj).get("namespace", ""), ref.get("name", "")


class InstanceCredentials:
    def __init__(self, watches: Mapping[Any, Informer], secrets: Cache) -> None:
        self.exporters = watches[EXPORTERS]
        self.configmaps = watches[CONFIGMAPS]
        self.secrets = secrets

    def of(self, exporter: Obj, klass: Obj) -> Credentials | str:
        """An Exporter's credentials from the caches, or why it has none yet. A Secret of
        the instance's name that another Exporter controls (an earlier one of that name,
        its config Secret not yet collected) is never taken for this one's."""
        meta = meta_of(exporter)
        namespace, uid = meta.get("namespace", ""), meta.get("uid", "")
        secrets = self.secrets
        config_name = config_secret_name(meta.get("name", ""))
        config = secrets.get(namespace, config_name)
        if config is not None and controller_of(config) not in ("", uid):
            return f'Secret "{config_name}" belongs to an earlier Exporter; waiting for it to go'
        credential = secrets.get(namespace, credential_secret_name(exporter))
        if credential is not None and controller_of(credential) not in ("", uid):
            return f'Secret "{credential_secret_name(exporter)}" belongs to another Exporter'
        return resolve(exporter, klass, secrets.get, self.configmaps.get)

    def for_pass(
        self,
        namespace: str,
        klass: Obj | None,
        observed: Mapping[str, Credentials | str],
        work: Iterable[Action],
    ) -> dict[str, Credentials | str]:
        """What the pass's steps render from: the credentials its observation found, but
        for the instances whose Secrets are read again before their Pod is created, whose
        credentials are worked out again from what was read."""
        credentials = dict(observed)
        for exporter in self._confirm(namespace, work):
            if klass is not None:
                credentials[meta_of(exporter).get("name", "")] = self.of(exporter, klass)
        return credentials

    def _confirm(self, namespace: str, actions: Iterable[Action]) -> list[Obj]:
        """An instance's Pod is about to be created, and `jmp run` reads its config once,
        at start: read its two Secrets now (even if read a moment ago: a token rotated
        since, with no event, would otherwise reach no exporter before the next), so the Pod
        starts from what they hold (a rotated token, a config edited by hand). The
        Exporters whose Secrets were read again."""
        named = self.secrets
        if not isinstance(named, NamedCache):
            return []  # watched: the cache is current
        confirmed = []
        for action in actions:
            if not isinstance(action, CreatePod):
                continue
            exporter = self.exporters.get(namespace, action.exporter)
            credential = credential_secret_name(exporter) if exporter is not None else ""
            if exporter is not None and credential:
                named.confirm(namespace, credential)
                named.confirm(namespace, config_secret_name(action.exporter))
                confirmed.append(exporter)
        return confirmed

    def track(self, kind: str, new: Obj, old: Obj | None) -> None:
        """Read by name the two Secrets of a pool's instance once its credentials are
        issued (before that nothing renders from them): the credential Secret its status
        names, read again whenever that name changes, and its config Secret. An Exporter
        handler that runs before those that may plan with them."""
        named = self.secrets
        assert isinstance(named, NamedCache)
        if not any(True for _ in owner_sets(new)):
            return
        namespace, name = key_of(new)
        credential = credential_secret_name(new) if kind != "DELETED" else ""
        before = credential_secret_name(old) if old is not None else ""
        if kind == "DELETED":
            before = credential_secret_name(new)
        if before and before != credential and not self._named_by_exporter(namespace, before):
            named.untrack(namespace, before)
        if kind == "DELETED":
            named.untrack(namespace, config_secret_name(name))
        elif credential:
            named.track(namespace, credential)
            named.track(namespace, config_secret_name(name))

    def _named_by_exporter(self, namespace: str, secret: str) -> bool:
        """Whether a pool's Exporter still names this credential Secret."""
        named = self.exporters.by_index("credential", (namespace, secret))
        return any(True for exporter in named for _ in owner_sets(exporter))
