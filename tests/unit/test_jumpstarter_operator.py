"""The operator's install made from the release's source renders as the release's
installer: its 0.9.0 image, its namespace and Deployment, the CRDs it serves; main's, from
main's source, the same with main's image and main's CRDs."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from harness.deploy_render import kubectl
from harness.jumpstarter_build import MAIN_SOURCE, RELEASE_OPERATOR_SOURCE, RELEASE_SOURCE
from harness.jumpstarter_images import MAIN_OPERATOR_IMAGE, OPERATOR_IMAGES
from harness.jumpstarter_operator import OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, write


def _rendered(folder: Path) -> list[dict[str, Any]]:
    done = subprocess.run([kubectl(), "kustomize", folder], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def _crds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["spec"]["names"]["plural"] + "." + o["spec"]["group"] for o in objects
            if o["kind"] == "CustomResourceDefinition"}  # fmt: skip


def test_the_release_s_config_default_renders_with_the_release_s_operator_image(
    tmp_path: Path,
) -> None:
    objects = _rendered(write(tmp_path / "operator"))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["metadata"]["name"] == OPERATOR_DEPLOYMENT
    assert deployment["metadata"]["namespace"] == OPERATOR_NAMESPACE
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    # The tag the release's build writes, not the 0.8.1-rc.1 its manifest still names.
    assert container["image"] == OPERATOR_IMAGES[-1]
    assert container["imagePullPolicy"] == "IfNotPresent"
    crds = _crds(objects)
    served = {name.removesuffix(".yaml").split("_", 1)[1] + "." + name.split("_")[0]
              for name in (*RELEASE_SOURCE.crds, *RELEASE_OPERATOR_SOURCE.crds)}  # fmt: skip
    assert crds == served, (crds, served)


def test_main_s_config_default_renders_with_main_s_operator_image_and_its_crds(
    tmp_path: Path,
) -> None:
    objects = _rendered(write(tmp_path / "operator", MAIN_SOURCE, MAIN_OPERATOR_IMAGE))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert (deployment["metadata"]["namespace"], deployment["metadata"]["name"]) == (
        OPERATOR_NAMESPACE,
        OPERATOR_DEPLOYMENT,
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (
        MAIN_OPERATOR_IMAGE,
        "IfNotPresent",
    )
    # main's adds the two kinds its exporter-set controllers serve
    assert {
        f"{n}.virtualtarget.jumpstarter.dev" for n in ("exportersets", "virtualtargetclasses")
    } | {
        "jumpstarters.operator.jumpstarter.dev",
        "exporters.jumpstarter.dev",
        "leases.jumpstarter.dev",
    } <= _crds(objects)
