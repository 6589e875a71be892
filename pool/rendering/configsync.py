"""Whether an instance's config Secret must be written: the rendered Secret when the cached
one differs from it, None when it already holds what it should.

Rendering the YAML of every instance's config on every pass costs more than the rest of
the pass together, and on a steady pool it always comes out the same. So each instance's
last rendering is remembered as two digests: of the config it rendered (as compact JSON,
cheap to compute) and of the `config.yaml` data that came out. When the config's digest
is unchanged and the cached Secret still holds that data (a hand edit changes its digest)
with the labels and owner it should have, nothing is rendered. No I/O; thread-safe for
workers that handle different instances (one dict entry per instance).

The Secret cache need not keep the data itself either (4 KiB an instance with a CA
bundle): `kept_data` stands for it by its digest, and every comparison here reads either.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import yaml

from pool.model.jumpstarter import CONFIG_KEY
from pool.rendering.render import InstanceContext, config_secret

__all__ = ["ConfigSync", "kept_data", "same_secret", "with_token"]

Obj = dict[str, Any]
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# Not in base64's alphabet: a kept digest is never taken for data.
_KEPT = "blake2b:"


def _digest(text: str | None) -> bytes:
    if text and text.startswith(_KEPT):
        return bytes.fromhex(text[len(_KEPT) :])
    return hashlib.blake2b((text or "").encode(), digest_size=16).digest()


def kept_data(value: str) -> str:
    """What a cache keeps of a `config.yaml` value: its digest, which the comparisons
    here read as the value itself."""
    return value if value.startswith(_KEPT) else _KEPT + _digest(value).hex()


def same_secret(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """What the reconciler renders (data, type, labels, owner) is what the Secret holds
    (its data as sent, or as a cache keeps it)."""
    have, want = current.get("data") or {}, wanted["data"]
    return (
        have.keys() == want.keys()
        and all(_digest(have[k]) == _digest(want[k]) for k in want)
        and _same_frame(current, wanted)
    )


def _same_frame(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    have, want = current.get("metadata") or {}, wanted["metadata"]
    return (
        current.get("type", "Opaque") == wanted["type"]
        and (have.get("labels") or {}) == want["labels"]
        and [r.get("uid") for r in have.get("ownerReferences") or []]
        == [r.get("uid") for r in want["ownerReferences"]]
    )


def with_token(ctx: InstanceContext, current: Mapping[str, Any]) -> Obj | None:
    """An outdated instance's config Secret (read live: a cache may keep only digests)
    with the instance's current token in place of the one it holds, everything else as
    its process started with it; None when it holds that token already. A `config.yaml`
    that does not parse is rendered afresh (there is nothing to keep)."""
    token = ctx.credentials.token if ctx.credentials is not None else ""
    try:
        text = base64.b64decode((current.get("data") or {}).get(CONFIG_KEY) or "")
        config = yaml.safe_load(text)
    except (binascii.Error, ValueError, yaml.YAMLError):
        config = None
    if not isinstance(config, dict):
        return None
    if config.get("token") == token:
        return None
    return config_secret(ctx, {**config, "token": token})


class ConfigSync:
    def __init__(self) -> None:
        # (namespace, exporter) -> (digest of the config, digest of its config.yaml data)
        self._rendered: dict[tuple[str, str], tuple[bytes, bytes]] = {}
        # (namespace, exporter) -> digest of the token an outdated instance's Secret holds
        self._tokens: dict[tuple[str, str], bytes] = {}

    def token_unknown(self, ctx: InstanceContext) -> bool:
        """The outdated instance's Secret may not hold its current token (a rotation, or
        nothing seen since this process started)."""
        token = ctx.credentials.token if ctx.credentials is not None else ""
        return self._tokens.get((ctx.namespace, ctx.exporter)) != _digest(token)

    def token_kept(self, ctx: InstanceContext) -> None:
        """The outdated instance's Secret holds its current token now."""
        token = ctx.credentials.token if ctx.credentials is not None else ""
        self._tokens[(ctx.namespace, ctx.exporter)] = _digest(token)

    def wanted(
        self, ctx: InstanceContext, config: Mapping[str, Any], current: Mapping[str, Any] | None
    ) -> Obj | None:
        """The Secret to write, or None when `current` (the cached one) is up to date."""
        key = (ctx.namespace, ctx.exporter)
        config_digest = _digest(_ENCODE(config))
        data = ((current or {}).get("data") or {}).get(CONFIG_KEY)
        if current is not None and self._rendered.get(key) == (config_digest, _digest(data)):
            frame = {
                "type": "Opaque",
                "metadata": {
                    "labels": ctx.secret_labels(),
                    "ownerReferences": [ctx.owner_reference()],
                },
            }
            if _same_frame(current, frame):
                return None
        wanted = config_secret(ctx, config)
        self._rendered[key] = (config_digest, _digest(wanted["data"][CONFIG_KEY]))
        if current is not None and same_secret(current, wanted):
            return None
        return wanted

    def forget(self, namespace: str, exporter: str) -> None:
        """The instance is gone: drop what was remembered of it."""
        self._rendered.pop((namespace, exporter), None)
        self._tokens.pop((namespace, exporter), None)

    def __len__(self) -> int:
        return len(self._rendered)
