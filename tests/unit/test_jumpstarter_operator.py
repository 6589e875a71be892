"""The operator's install made from the release's source renders as the release's
installer: its 0.9.0 image, its namespace and Deployment, the CRDs it serves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from harness.deploy_render import kubectl
from harness.jumpstarter_build import RELEASE_OPERATOR_SOURCE, RELEASE_SOURCE
from harness.jumpstarter_images import OPERATOR_IMAGES
from harness.jumpstarter_operator import OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, write


def test_the_release_s_config_default_renders_with_the_release_s_operator_image(
    tmp_path: Path,
) -> None:
    folder = write(tmp_path / "operator")
    done = subprocess.run([kubectl(), "kustomize", folder], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["metadata"]["name"] == OPERATOR_DEPLOYMENT
    assert deployment["metadata"]["namespace"] == OPERATOR_NAMESPACE
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    # The tag the release's build writes, not the 0.8.1-rc.1 its manifest still names.
    assert container["image"] == OPERATOR_IMAGES[-1]
    assert container["imagePullPolicy"] == "IfNotPresent"
    crds = {o["spec"]["names"]["plural"] + "." + o["spec"]["group"] for o in objects
            if o["kind"] == "CustomResourceDefinition"}  # fmt: skip
    served = {name.removesuffix(".yaml").split("_", 1)[1] + "." + name.split("_")[0]
              for name in (*RELEASE_SOURCE.crds, *RELEASE_OPERATOR_SOURCE.crds)}  # fmt: skip
    assert crds == served, (crds, served)
