"""Turning the image allow-list on under a running pool, through kube-apiserver.

A pool runs from a class whose runtime image the list will refuse. Then the webhook and
the reconciler are started again with the overlay's list: the pool keeps its Exporters
and Pods, its set reports `ImagesAllowed` False, an update of the set that leaves the
image alone is admitted with a warning, and the pool does not grow from the refused image.
Once the class names an allowed image the pool grows again, from that image only.

Jumpstarter's released 0.9.0 controller serves the namespace and issues the instances'
credentials (no exporter runs: the pool's Pods are what is looked at).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from api.jumpstarter import JUMPSTARTER_REPOSITORIES
from harness.controlplane import ControlPlane
from harness.stack import (
    register_webhooks,
    running_reconciler,
    running_webhook,
    unregister_webhooks,
)
from pool.model.keys import NAME_LABEL, SET_LABEL
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    virtual_target_class,
    wait_for,
)
from tests.e2e.test_image_policy_e2e import ALLOWED, OTHER, images, overlay_image_flags

# The pool's objects, by the label each kind carries: Exporters the product's set label,
# instance Pods Jumpstarter's (the Exporter's SET_LABEL is not copied onto its Pod).
POOL = {"exporters": f"{SET_LABEL}=pool", "pods": f"{NAME_LABEL}=pool"}


def of_pool(plane: ControlPlane, kind: str, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(plane, kind, "-n", ns, "-l", POOL[kind])["items"]
    return items


def uids(plane: ControlPlane, kind: str, ns: str) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in of_pool(plane, kind, ns)}


# The layout whose Pods run the runtime image (a sidecar), so the class's image is used.
SIDECAR = {"layout": "sidecar"}


def runtime_images(plane: ControlPlane, ns: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: next(
            c["image"] for c in p["spec"]["initContainers"] if c["name"] == "target-runtime"
        )
        for p in of_pool(plane, "pods", ns)
    }


def images_condition(plane: ControlPlane, ns: str) -> dict[str, Any] | None:
    found = get_json(plane, "exporterset", "pool", "-n", ns)
    for condition in found.get("status", {}).get("conditions", []):
        if condition["type"] == "ImagesAllowed":
            return {**condition, "generation": found["metadata"]["generation"]}
    return None


def test_turning_a_list_on_leaves_a_running_pool_and_reports_it(
    control_plane: ControlPlane, ns: str, tmp_path: Path
) -> None:
    plane = control_plane
    local = ["--namespace", ns, "--no-leader-election"]
    apply(plane, virtual_target_class("lab", ns, images=images(runtime=OTHER), parameters=SIDECAR))
    apply(plane, exporter_set("pool", ns, class_name="lab", with_template=True, minReplicas=2))
    with running_reconciler(plane, tmp_path, name="before", extra=local):
        wait_for("two Pods", lambda: len(runtime_images(plane, ns)) == 2)
    exporters, pods = uids(plane, "exporters", ns), uids(plane, "pods", ns)
    assert set(runtime_images(plane, ns).values()) == {OTHER}

    flags = overlay_image_flags()
    (tmp_path / "webhook").mkdir()
    with (
        running_webhook(plane, tmp_path / "webhook", extra=flags) as server,
        running_reconciler(plane, tmp_path, name="after", extra=[*local, *flags]),
    ):
        register_webhooks(plane, server)
        try:
            refused = wait_for(
                "ImagesAllowed False",
                lambda: (c := images_condition(plane, ns)) and c["status"] == "False" and c,
            )
            assert refused["reason"] == "ImageNotAllowed"
            assert refused["message"] == (
                f'spec.images.runtime.image "{OTHER}" of VirtualTargetClass "lab": not on the '
                f"administrator's image allow-list (allowed prefixes: {JUMPSTARTER_REPOSITORIES}); "
                "running instances stay, no new instance is created from it"
            )
            # A scale-up of the set, leaving the image alone: admitted, with a warning.
            scaled = plane.kubectl(
                "patch", "exporterset", "pool", "-n", ns, "--type=merge",
                "-p", json.dumps({"spec": {"minReplicas": 3}}),
            )  # fmt: skip
            assert scaled.stderr == (
                "Warning: spec.images.runtime.image is not on the administrator's image "
                "allow-list; admitted as unchanged, no new instance uses it\n"
            )
            wait_for(
                "the reconciler to see the scale-up",
                lambda: (c := images_condition(plane, ns))
                and c["observedGeneration"] == c["generation"],
            )
            # Not torn down, and not grown from the refused image.
            assert uids(plane, "exporters", ns) == exporters
            assert uids(plane, "pods", ns) == pods

            # The class moves to an allowed image: the pool grows, from it only.
            apply(
                plane,
                virtual_target_class("lab", ns, images=images(runtime=ALLOWED), parameters=SIDECAR),
            )
            grown = wait_for("a third Pod", lambda: len(runtime_images(plane, ns)) == 3)
            assert grown
            now = runtime_images(plane, ns)
            new = set(now) - set(pods)
            assert [now[name] for name in new] == [ALLOWED]
            assert {now[name] for name in pods} == {OTHER}  # the running ones stay as they are
            assert uids(plane, "pods", ns).items() >= pods.items()
            wait_for(
                "ImagesAllowed True",
                lambda: (c := images_condition(plane, ns)) and c["status"] == "True",
            )
        finally:
            unregister_webhooks(plane)
