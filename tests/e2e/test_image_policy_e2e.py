"""The image allow-list through kube-apiserver: the webhook started with the list its
Deployment carries in the rendered self-signed overlay, registered from that overlay.

A refused image is denied on a set, on a class, and through the merge (a class stored
before the list was turned on, and a set that leaves the image to it); an allowed one is
admitted. kubectl's whole text is pinned.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from api.jumpstarter import JUMPSTARTER_REPOSITORIES
from harness.controlplane import ControlPlane
from harness.deploy_render import container_args, render_overlay
from harness.stack import register_webhooks, running_webhook, unregister_webhooks
from tests.e2e.objects import apply, exporter_set, try_apply, virtual_target_class

OTHER = "registry.example.com/lab/qemu-runtime:1"
ALLOWED = f"{JUMPSTARTER_REPOSITORIES}virtual/qemu-runtime:0.9.1"
REFUSED = (
    f"not on the administrator's image allow-list (allowed prefixes: {JUMPSTARTER_REPOSITORIES})"
)


def overlay_image_flags() -> list[str]:
    """The allow-list flags the rendered webhook Deployment passes."""
    args = container_args(render_overlay("self-signed"), "virtualtarget-webhook")
    return [a for a in args if a.startswith(("--allowed-image-", "--require-image-"))]


def images(**roles: str) -> dict[str, dict[str, str]]:
    return {role: {"image": image} for role, image in roles.items()}


@pytest.fixture(scope="module")
def lab(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A namespace holding class `legacy`, stored before the list (no webhook yet), and the
    webhook with the overlay's list registered."""
    ns = f"img-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", ns)
    apply(control_plane, virtual_target_class("legacy", ns, images=images(runtime=OTHER)))
    flags = overlay_image_flags()
    assert flags == [f"--allowed-image-prefixes={JUMPSTARTER_REPOSITORIES}"]
    workdir = tmp_path_factory.mktemp("webhook")
    with running_webhook(control_plane, workdir, extra=flags) as server:
        register_webhooks(control_plane, server)
        yield ns
        unregister_webhooks(control_plane)


def test_a_refused_image_on_a_set_is_denied(control_plane: ControlPlane, lab: str) -> None:
    apply(control_plane, virtual_target_class("qemu", lab))
    result = try_apply(
        control_plane, exporter_set("own", lab, class_name="qemu", images=images(runtime=OTHER))
    )
    assert (result.returncode, result.stderr) == (
        1,
        f'The ExporterSet "own" is invalid: spec.images.runtime.image: Invalid value: "{OTHER}": '
        f"{REFUSED}\n",
    )


def test_a_refused_image_on_a_class_is_denied(control_plane: ControlPlane, lab: str) -> None:
    exporter = "ghcr.io/someone/jumpstarter:latest"
    result = try_apply(
        control_plane, virtual_target_class("mine", lab, images=images(exporter=exporter))
    )
    assert (result.returncode, result.stderr) == (
        1,
        f'The VirtualTargetClass "mine" is invalid: spec.images.exporter.image: Invalid value: '
        f'"{exporter}": {REFUSED}\n',
    )


def test_a_refused_image_through_the_merge_is_denied(control_plane: ControlPlane, lab: str) -> None:
    result = try_apply(control_plane, exporter_set("inherits", lab, class_name="legacy"))
    assert (result.returncode, result.stderr) == (
        1,
        f'The ExporterSet "inherits" is invalid: spec.images.runtime.image: Invalid value: '
        f'"{OTHER}": the image VirtualTargetClass "legacy" names, which this set does not '
        f"override: {REFUSED}\n",
    )
    # Overriding the class's image with an allowed one: what would run is allowed.
    result = try_apply(
        control_plane,
        exporter_set("overrides", lab, class_name="legacy", images=images(runtime=ALLOWED)),
    )
    assert (result.returncode, result.stderr) == (0, "")


def test_allowed_and_default_images_are_admitted(control_plane: ControlPlane, lab: str) -> None:
    exporter = f"{JUMPSTARTER_REPOSITORIES}jumpstarter:0.9.1"
    result = try_apply(
        control_plane,
        virtual_target_class("jumpstarter", lab, images=images(exporter=exporter)),
        exporter_set("allowed", lab, class_name="jumpstarter", images=images(runtime=ALLOWED)),
        virtual_target_class("plain", lab),
        exporter_set("defaults", lab, class_name="plain"),
    )
    assert (result.returncode, result.stderr) == (0, "")
