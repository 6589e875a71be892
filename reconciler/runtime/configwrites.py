"""The config Secrets of a pool's instances, written only when they differ.

An instance's config Secret is rendered and compared with the cached one, and written
only when it differs (a steady pool writes nothing; a rotated token is written at once);
an outdated instance, whose process keeps the configuration it started with, gets only
its rotated token written into what its Secret holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from pool.model.access import SECRETS
from pool.rendering.configsync import same_secret, with_token
from pool.rendering.render import Credentials, InstanceContext, exporter_config, instance_context
from reconciler.runtime.failures import StepFailed, classify
from reconciler.runtime.kube import ApiError, NotLeading
from reconciler.runtime.named import NamedCache
from reconciler.runtime.writer import Writer, render_or_fail

__all__ = ["ConfigWrites"]

Obj = dict[str, Any]


class ConfigWrites(Writer):
    def keep_current(self, names: Iterable[str], token_only: Iterable[str] = ()) -> int:
        """Bring the config Secrets of running instances up to date, and only the token
        in those of `token_only` (outdated: their process keeps the configuration it
        started with); writes made. StepFailed (step "update config <name>") at the
        first that fails for good."""
        before = self.writes
        syncs = [(n, self._sync_config) for n in names]
        syncs += [(n, self._sync_token) for n in token_only]
        for name, sync in syncs:
            exporter = self._cached_exporter(name)
            try:
                ctx = self._context(exporter) if exporter is not None else None
                if ctx is not None:
                    sync(ctx)
            except NotLeading:
                raise
            except Exception as exc:
                failure = classify(f"update config {name}", exc)
                if failure is None:
                    raise
                raise StepFailed(failure) from exc
        return self.writes - before

    def _context(self, exporter: Obj) -> InstanceContext | None:
        """The instance's rendering inputs, or None while it cannot be rendered."""
        klass = self.this.klass
        name = str((exporter.get("metadata") or {}).get("name", ""))
        credentials = self.this.credentials.get(name)
        if klass is None or not isinstance(credentials, Credentials):
            return None  # planned from a cache that has moved on; the next pass says why
        context: InstanceContext = render_or_fail(
            instance_context,
            self.this.exporter_set,
            klass,
            exporter,
            self.runtime.provisioner.default_images,
            credentials,
        )
        targets = self.runtime.targets
        if targets is not None:  # where its Services there are reached (their drivers)
            found = targets.objects_of(self._key, name)
            context = replace(context, target_objects=found)
        return context

    def _sync_config(self, ctx: InstanceContext) -> None:
        """Write the config Secret only when the cached one differs from the rendered one."""
        current = self._cached_secret(ctx.config_secret)

        def render() -> Obj | None:
            config = exporter_config(ctx, self.runtime.provisioner.drivers(ctx))
            return self.runtime.configs.wanted(ctx, config, current)

        wanted = render_or_fail(render)
        if wanted is None:
            return
        if current is None:
            try:
                self.runtime.secrets.observed_write(
                    self._write(lambda: self.kube.create(SECRETS, self.namespace, wanted))
                )
                return
            except ApiError as exc:
                if exc.status != 409:
                    raise
            current = self.kube.get(SECRETS, self.namespace, ctx.config_secret)
            if current is None or same_secret(current, wanted):
                if current is not None:
                    self.runtime.secrets.observed_write(current)
                return
        version = (current.get("metadata") or {}).get("resourceVersion")
        body = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
        try:
            answer = self._write(
                lambda: self.kube.update(SECRETS, self.namespace, ctx.config_secret, body)
            )
        except ApiError as exc:
            if exc.status in (404, 409):  # changed or deleted since the cache read it
                self._stale_secret(ctx.config_secret)
            raise
        self.runtime.secrets.observed_write(answer)

    def _sync_token(self, ctx: InstanceContext) -> None:
        """An outdated instance's Secret: a rotated token written into what it holds."""
        configs = self.runtime.configs
        if not configs.token_unknown(ctx):
            return
        current = self.kube.get(SECRETS, self.namespace, ctx.config_secret)
        if current is None:
            return  # its Pod cannot run without it: a new Pod brings the new one
        wanted = with_token(ctx, current)
        if wanted is not None:
            version = (current.get("metadata") or {}).get("resourceVersion")
            body = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": version}}
            answer = self._write(
                lambda: self.kube.update(SECRETS, self.namespace, ctx.config_secret, body)
            )
            self.runtime.secrets.observed_write(answer)
        configs.token_kept(ctx)

    def _stale_secret(self, name: str) -> None:
        """A write found the cached copy of this Secret out of date: read it again soon
        (Secrets read by name; a watch catches up by itself)."""
        secrets = self.runtime.secrets
        if isinstance(secrets, NamedCache):
            secrets.urge(self.namespace, name)
