"""The config Secret is written only when it differs from what it should hold; a steady
instance is not even rendered again."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any
from unittest import mock

from pool.rendering import configsync
from pool.rendering.configsync import ConfigSync
from pool.rendering.credentials import keep_credentials
from pool.rendering.render import Credentials, InstanceContext, config_secret, exporter_config

CTX = InstanceContext(
    namespace="ns",
    exporter="pool-0",
    exporter_uid="u-0",
    labels={"board": "x"},
    set_name="pool",
    parameters={},
    images={},
    recycle="ExitAndReplace",
    credentials=Credentials("grpc.example.com:443", "t0k3n", ""),
)
DRIVERS = [{"name": "power", "type": "jumpstarter_driver_power.driver.MockPower"}]


def stored(ctx: InstanceContext) -> dict[str, Any]:
    """The Secret as the cache holds it after the apiserver stored what was written."""
    secret = config_secret(ctx, exporter_config(ctx, DRIVERS))
    secret["metadata"]["resourceVersion"] = "7"
    return secret


def test_missing_secret_is_wanted_and_a_current_one_is_not() -> None:
    sync = ConfigSync()
    config = exporter_config(CTX, DRIVERS)
    assert sync.wanted(CTX, config, None) == config_secret(CTX, config)
    assert sync.wanted(CTX, config, stored(CTX)) is None


def test_a_steady_instance_is_not_rendered_again() -> None:
    sync = ConfigSync()
    config = exporter_config(CTX, DRIVERS)
    current = stored(CTX)
    assert sync.wanted(CTX, config, current) is None  # first look: rendered once
    with mock.patch.object(configsync, "config_secret", side_effect=AssertionError):
        for _ in range(3):
            assert sync.wanted(CTX, config, current) is None


def test_rotated_token_hand_edit_and_relabel_are_each_written_back() -> None:
    sync = ConfigSync()
    current = stored(CTX)
    assert sync.wanted(CTX, exporter_config(CTX, DRIVERS), current) is None

    assert CTX.credentials is not None
    rotated = dataclasses.replace(
        CTX, credentials=dataclasses.replace(CTX.credentials, token="n3w")
    )
    wanted = sync.wanted(rotated, exporter_config(rotated, DRIVERS), current)
    assert wanted is not None
    assert b"token: n3w" in base64.b64decode(wanted["data"]["config.yaml"])

    edited = stored(CTX)
    edited["data"]["config.yaml"] = base64.b64encode(b"token: mine\n").decode()
    assert sync.wanted(CTX, exporter_config(CTX, DRIVERS), edited) is not None

    relabelled = stored(CTX)
    relabelled["metadata"]["labels"] = {"board": "y"}
    assert sync.wanted(CTX, exporter_config(CTX, DRIVERS), relabelled) is not None


def test_forgotten_instances_take_no_memory() -> None:
    sync = ConfigSync()
    sync.wanted(CTX, exporter_config(CTX, DRIVERS), None)
    assert len(sync) == 1
    sync.forget("ns", "pool-0")
    assert len(sync) == 0


def test_a_cache_that_keeps_only_the_data_s_digest_compares_the_same() -> None:
    config = exporter_config(CTX, DRIVERS)
    kept = keep_credentials(stored(CTX))
    assert kept["data"]["config.yaml"] != stored(CTX)["data"]["config.yaml"]
    assert ConfigSync().wanted(CTX, config, kept) is None  # rendered, compared by digest
    sync = ConfigSync()
    assert sync.wanted(CTX, config, kept) is None
    assert sync.wanted(CTX, config, kept) is None  # and not rendered again
    edited = stored(CTX)
    edited["data"]["config.yaml"] = base64.b64encode(b"token: mine\n").decode()
    assert sync.wanted(CTX, config, keep_credentials(edited)) is not None


def test_an_outdated_instance_gets_only_its_rotated_token() -> None:
    """Its process keeps the drivers it started with: the Secret keeps them too."""
    sync = ConfigSync()
    before = stored(CTX)  # rendered from the earlier revision's drivers
    assert configsync.with_token(CTX, before) is None  # the token it holds is current
    assert sync.token_unknown(CTX)
    sync.token_kept(CTX)
    assert not sync.token_unknown(CTX)
    rotated = dataclasses.replace(CTX, credentials=Credentials("grpc.example.com:443", "n3w", ""))
    assert sync.token_unknown(rotated)
    wanted = configsync.with_token(rotated, before)
    assert wanted is not None
    text = base64.b64decode(wanted["data"]["config.yaml"]).decode()
    old = base64.b64decode(before["data"]["config.yaml"]).decode()
    assert text == old.replace("t0k3n", "n3w")  # nothing else moved, drivers included
    sync.forget("ns", "pool-0")
    assert sync.token_unknown(CTX)
