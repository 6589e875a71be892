"""The secrets benchmark's baseline differs from ours in the Secret cache alone, and its
report puts both side by side."""

from __future__ import annotations

from datetime import UTC, datetime
from unittest import mock

from bench import _secret_watch
from bench.reconciler import CountingKube
from bench.secrets import VARIANTS, Run, report
from pool.model.access import EXPORTERS, SECRETS
from pool.rendering.provisioners import provisioner
from reconciler.runtime import caches, controller, kube
from reconciler.runtime.cache import Informer
from reconciler.runtime.named import NamedCache
from reconciler.runtime.scope import Scope


def _secrets_cache() -> object:
    made = controller.Controller(
        CountingKube(),  # type: ignore[arg-type]
        provisioner("qemu.jumpstarter.dev"),
        scope=Scope(),
    )
    return made.secrets


def test_the_baseline_watches_every_secret_and_nothing_else_changes() -> None:
    assert isinstance(_secrets_cache(), NamedCache)
    with (
        mock.patch.object(caches, "secrets_by_name", lambda _scope: False),
        mock.patch.object(kube, "allowed", _secret_watch._allowed),
    ):
        cache = _secrets_cache()
        assert isinstance(cache, Informer) and cache.streams == (None,)
        assert kube.allowed(SECRETS, "watch") and not kube.allowed(EXPORTERS, "update")
    assert not kube.allowed(SECRETS, "watch")


def test_the_report_shows_each_run_and_the_medians_side_by_side() -> None:
    ours, theirs = VARIANTS
    runs = [
        Run(ours, 2.0, 0.9, 53.0, 0.05, 53.5, 54.0),
        Run(theirs, 6.0, 1.7, 117.0, 0.25, 120.0, 171.0),
    ]
    text = report(runs, 70.0, "1.0 1.0 1.0", datetime(2026, 12, 1, tzinfo=UTC))
    assert "Started 2026-12-01 00:00 UTC" in text
    assert f"| {ours} | 1 | 2.00 | 0.90 | 53.0 | 0.05 | 53.5 | 54.0 |" in text
    assert f"| {theirs} | 2.00 |" not in text
    assert f"| {theirs} | 6.00 | 1.70 | 171.0 | 0.25 |" in text
