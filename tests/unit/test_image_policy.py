"""The administrator's image allow-list: its matching rule, its flags, its texts, and the
webhook's checks of own, inherited and unchanged images (`api.imagepolicy`,
`webhook.checks_images`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from api.imagepolicy import (
    NO_ALLOW_LIST,
    ImagePolicy,
    add_flags,
    effective_images,
    from_flags,
    repository,
    startup_line,
)
from api.provisioners import DEFAULT_IMAGES
from tests.unit.test_webhook_support import a_class, a_set, review, schema_source
from virtualtarget.cli import main
from webhook.admission import Admission
from webhook.clusterview import StaticView
from webhook.decode import decode_review
from webhook.envelope import Outcome
from webhook.routes import ENDPOINTS, Role

JUMPSTARTER = ImagePolicy.from_settings(["quay.io/jumpstarter-dev/"])
DIGEST = "@sha256:" + "0123456789abcdef" * 4
OTHER = "registry.example.com/lab/qemu-runtime:1"
REFUSED = "not on the administrator's image allow-list (allowed prefixes: quay.io/jumpstarter-dev/)"


def policy(*prefixes: str, digest: bool = False) -> ImagePolicy:
    made = ImagePolicy.from_settings(prefixes, digest)
    assert made is not None
    return made


@pytest.mark.parametrize(
    ("reference", "allowed"),
    [
        ("quay.io/jumpstarter-dev/jumpstarter:0.9.1", True),
        ("quay.io/jumpstarter-dev/virtual/qemu-runtime" + DIGEST, True),
        ("QUAY.IO/jumpstarter-dev/jumpstarter:1", True),  # hosts are case-insensitive
        ("quay.io/jumpstarter-dev-mirror/jumpstarter:1", False),  # whole segments only
        ("quay.io/jumpstarter:1", False),
        ("evil.example.com/quay.io/jumpstarter-dev/x:1", False),
        ("jumpstarter-dev/jumpstarter:1", False),  # that is docker.io/jumpstarter-dev/...
    ],
)
def test_prefixes_match_whole_path_segments_of_the_repository(
    reference: str, allowed: bool
) -> None:
    assert (policy("quay.io/jumpstarter-dev/").refusal(reference) is None) is allowed
    # The trailing slash changes nothing.
    assert (policy("quay.io/jumpstarter-dev").refusal(reference) is None) is allowed


def test_references_are_read_as_the_container_runtime_resolves_them() -> None:
    assert repository("busybox") == "docker.io/library/busybox"
    assert repository("busybox:1.36") == "docker.io/library/busybox"
    assert repository("org/app:1") == "docker.io/org/app"
    assert repository("index.docker.io/org/app") == "docker.io/org/app"
    assert repository("localhost:5000/app:1") == "localhost:5000/app"
    assert repository("registry.example.com:5000/a/b" + DIGEST) == "registry.example.com:5000/a/b"
    hub = policy("docker.io/library/")
    assert hub.refusal("busybox:1.36") is None
    assert hub.refusal("org/app:1") is not None


def test_a_digest_can_be_required_and_the_text_names_what_is_missing() -> None:
    pinned = policy("quay.io/jumpstarter-dev/", digest=True)
    assert pinned.refusal("quay.io/jumpstarter-dev/jumpstarter" + DIGEST) is None
    assert pinned.refusal("quay.io/jumpstarter-dev/jumpstarter:0.9.1") == (
        "must be pinned by digest (@sha256:<64 hex digits>): the administrator's image "
        "allow-list requires one"
    )
    assert pinned.refusal(OTHER) == (
        "not on the administrator's image allow-list (allowed prefixes: "
        "quay.io/jumpstarter-dev/; @sha256: digest required)"
    )
    # A digest alone, without a list: any repository, pinned.
    assert policy(digest=True).refusal("registry.example.com/a" + DIGEST) is None
    assert policy(digest=True).refusal("registry.example.com/a:1") is not None


def test_the_provisioners_default_images_always_pass() -> None:
    strict = policy("registry.example.com/only/", digest=True)
    references = [r for images in DEFAULT_IMAGES.values() for r in images.values()]
    assert references
    for reference in references:
        assert ":" in reference.rsplit("/", 1)[-1]  # tagged, not pinned
        assert strict.refusal(reference) is None


def test_no_list_and_no_digest_requirement_is_no_policy() -> None:
    assert ImagePolicy.from_settings([]) is None
    assert ImagePolicy.from_settings(["", " "]) is None


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (
            "jumpstarter-dev/",
            "'jumpstarter-dev/': must start with a registry host, e.g. quay.io/jumpstarter-dev/ "
            "(docker.io/ for Docker Hub)",
        ),
        (
            "quay.io/jumpstarter-dev/jumpstarter:0.9.0",
            "'quay.io/jumpstarter-dev/jumpstarter:0.9.0': must name a registry or repository "
            "path, not a tag or digest",
        ),
    ],
)
def test_a_malformed_prefix_is_refused_with_its_reason(prefix: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        ImagePolicy.from_settings([prefix])
    assert str(raised.value) == message


def test_the_flags_take_commas_and_repetition() -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    args = parser.parse_args(
        [
            "--allowed-image-prefixes=quay.io/jumpstarter-dev/,registry.example.com/lab",
            "--allowed-image-prefixes=ghcr.io/org/",
            "--require-image-digest",
        ]
    )
    made = from_flags(args)
    assert made is not None
    assert made.prefixes == ("quay.io/jumpstarter-dev/", "registry.example.com/lab", "ghcr.io/org/")
    assert made.require_digest
    assert from_flags(parser.parse_args([])) is None


_SEGMENT = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=8)


@settings(deadline=None)
@given(path=st.lists(_SEGMENT, min_size=1, max_size=3), tag=_SEGMENT, suffix=_SEGMENT)
def test_below_a_prefix_is_allowed_and_a_sibling_sharing_its_text_is_not(
    path: list[str], tag: str, suffix: str
) -> None:
    below = f"quay.io/jumpstarter-dev/{'/'.join(path)}:{tag}"
    sibling = f"quay.io/jumpstarter-dev{suffix}/{'/'.join(path)}:{tag}"
    assert policy("quay.io/jumpstarter-dev/").refusal(below) is None
    assert policy("quay.io/jumpstarter-dev/").refusal(sibling) is not None


def test_the_merge_takes_the_set_over_the_class_over_the_default() -> None:
    defaults = {"exporter": "quay.io/jumpstarter-dev/jumpstarter:0.9.0", "runtime": "r:0"}
    set_spec = {"images": {"exporter": {"image": "set/exporter:1"}}}
    class_spec = {"images": {"exporter": {"image": "c/e:1"}, "runtime": {"image": "c/r:1"}}}
    chosen = {
        (c.role, c.reference, c.source) for c in effective_images(set_spec, class_spec, defaults)
    }
    assert chosen == {
        ("exporter", "set/exporter:1", "ExporterSet"),
        ("runtime", "c/r:1", "VirtualTargetClass"),
    }
    only_pull_policy = {"images": {"runtime": {"imagePullPolicy": "Always"}}}
    chosen = {(c.role, c.source) for c in effective_images(only_pull_policy, {}, defaults)}
    assert chosen == {("exporter", ""), ("runtime", "")}


# -- at admission ----------------------------------------------------------------------

VALIDATE = {e.kind.kind: e for e in ENDPOINTS if e.role is Role.VALIDATE}


def admit(objects: list[dict[str, Any]], obj: dict[str, Any], **kw: Any) -> Outcome:
    admission = Admission(schema_source, StaticView(objects), image_policy=JUMPSTARTER)
    request = decode_review(json.dumps(review(obj, **kw)).encode())
    return asyncio.run(admission.review(VALIDATE[request.kind], request, 1.0))


def images(**roles: str) -> dict[str, Any]:
    return {role: {"image": image} for role, image in roles.items()}


def texts(outcome: Outcome) -> list[str]:
    return [str(e) for e in outcome.errors]


def test_a_refused_image_on_a_set_or_a_class_is_denied_at_its_field() -> None:
    outcome = admit([a_class()], a_set(images=images(runtime=OTHER)))
    assert texts(outcome) == [f'spec.images.runtime.image: Invalid value: "{OTHER}": {REFUSED}']
    outcome = admit([], a_class(images=images(exporter="ghcr.io/me/exporter:1")))
    assert texts(outcome) == [
        f'spec.images.exporter.image: Invalid value: "ghcr.io/me/exporter:1": {REFUSED}'
    ]


def test_an_image_the_set_inherits_from_its_class_is_checked_after_the_merge() -> None:
    legacy = a_class(images=images(runtime=OTHER))
    outcome = admit([legacy], a_set())
    assert texts(outcome) == [
        f'spec.images.runtime.image: Invalid value: "{OTHER}": the image VirtualTargetClass '
        f'"qemu" names, which this set does not override: {REFUSED}'
    ]
    # The set's own allowed image wins over the class's: nothing refused runs.
    allowed = images(runtime="quay.io/jumpstarter-dev/virtual/qemu-runtime:0.9.1")
    assert admit([legacy], a_set(images=allowed)).allowed


def test_allowed_and_default_images_are_admitted_without_a_word() -> None:
    allowed = images(exporter="quay.io/jumpstarter-dev/jumpstarter:0.9.1")
    outcome = admit([a_class(images=allowed)], a_set())
    assert (outcome.allowed, outcome.warnings) == (True, [])
    outcome = admit([a_class()], a_set(images=images(**DEFAULT_IMAGES["qemu.jumpstarter.dev"])))
    assert (outcome.allowed, outcome.warnings) == (True, [])


def test_on_update_an_unchanged_refused_image_is_a_warning_and_a_new_one_is_denied() -> None:
    kept = (
        "spec.images.runtime.image is not on the administrator's image allow-list; "
        "admitted as unchanged, no new instance uses it"
    )
    running = a_set(images=images(runtime=OTHER))
    scaled = a_set(images=images(runtime=OTHER), minReplicas=3)
    outcome = admit([a_class()], scaled, operation="UPDATE", old=running)
    assert (outcome.allowed, outcome.warnings) == (True, [kept])
    changed = a_set(images=images(runtime="registry.example.com/lab/qemu-runtime:2"))
    assert not admit([a_class()], changed, operation="UPDATE", old=running).allowed
    # Inherited: a set that never overrode the image may still be updated...
    legacy = a_class(images=images(runtime=OTHER))
    outcome = admit([legacy], a_set(minReplicas=3), operation="UPDATE", old=a_set())
    assert (outcome.allowed, outcome.warnings) == (True, [kept])
    # ...but dropping its own allowed image to fall back on the refused one is denied.
    own = a_set(images=images(runtime="quay.io/jumpstarter-dev/virtual/qemu-runtime:1"))
    assert not admit([legacy], a_set(), operation="UPDATE", old=own).allowed
    # A class keeps its refused image through an update of something else.
    updated = a_class(images=images(runtime=OTHER), reclaimPolicy="Retain")
    outcome = admit([], updated, operation="UPDATE", old=legacy)
    assert (outcome.allowed, outcome.warnings) == (True, [kept])


def test_without_a_list_every_well_formed_image_is_admitted() -> None:
    admission = Admission(schema_source, StaticView([a_class(images=images(runtime=OTHER))]))
    request = decode_review(json.dumps(review(a_set(images=images(exporter=OTHER)))).encode())
    outcome = asyncio.run(admission.review(VALIDATE["ExporterSet"], request, 1.0))
    assert (outcome.allowed, outcome.warnings) == (True, [])


# -- offline -----------------------------------------------------------------------------


def test_validate_applies_the_same_list_when_given_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "pool.yaml"
    legacy = a_class(images=images(runtime=OTHER))
    pinned = images(exporter="quay.io/jumpstarter-dev/jumpstarter:0.9.1")
    manifest.write_text(yaml.safe_dump_all([legacy, a_set(images=pinned)]))
    assert main(["validate", "-q", "-f", str(manifest)]) == 0
    capsys.readouterr()
    flags = ["--allowed-image-prefixes=quay.io/jumpstarter-dev/", "--require-image-digest"]
    assert main(["validate", "-q", "-f", str(manifest), *flags]) == 1
    digest = (
        "must be pinned by digest (@sha256:<64 hex digits>): the administrator's image "
        "allow-list requires one"
    )
    assert capsys.readouterr().err.splitlines() == [
        f"{manifest}: VirtualTargetClass/qemu: spec.images.runtime.image: Invalid value: "
        f'"{OTHER}": {REFUSED[:-1]}; @sha256: digest required)',
        f"{manifest}: ExporterSet/pool-a: spec.images.exporter.image: Invalid value: "
        f'"quay.io/jumpstarter-dev/jumpstarter:0.9.1": {digest}',
        f'{manifest}: ExporterSet/pool-a: spec.images.runtime.image: Invalid value: "{OTHER}": '
        f'the image VirtualTargetClass "qemu" names, which this set does not override: '
        f"{REFUSED[:-1]}; @sha256: digest required)",
        "2 object(s) denied",
    ]
    assert main(["validate", "-f", str(manifest), "--allowed-image-prefixes=jumpstarter-dev"]) == 2
    assert capsys.readouterr().err.startswith(
        "virtualtarget validate: --allowed-image-prefixes: 'jumpstarter-dev': must start with"
    )


def test_a_component_without_a_list_warns_at_start() -> None:
    assert startup_line(None) == (logging.WARNING, NO_ALLOW_LIST)
    level, text = startup_line(ImagePolicy.from_settings(["quay.io/jumpstarter-dev/"], False))
    assert (level, text.split(":")[0]) == (logging.INFO, "image allow-list")
