"""The product installed on the node cluster as a user installs it (README, "Install in a
cluster"): the image built by `virtualtarget.images` and imported under the name
deploy/base uses, Jumpstarter's Lease CRD (the project's test copy), the self-signed
overlay with the `exporter-crd` component, its certificates made by the image's `certs`
command, then `kubectl apply -k`."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.objects import install_lease_crd
from tests.unit.test_deploy_readme import documented_certs_run
from virtualtarget.deploy_render import DEPLOY, REPO
from virtualtarget.images import build_product, product_image, unpacked
from virtualtarget.node import NodeCluster

NAMESPACE = "virtualtarget-system"
WEBHOOK, RECONCILER = "virtualtarget-webhook", "virtualtarget-reconciler"
DEPLOYMENTS = (WEBHOOK, RECONCILER)
ROLLOUT_TIMEOUT_S = 180


@dataclass
class Install:
    cluster: NodeCluster
    tree: Path  # the copy of deploy/ and crds/ that was applied
    image: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def overlay(self) -> Path:
        return self.tree / "deploy" / "overlays" / "self-signed"

    def kubectl(self, *args: str, **kwargs: Any) -> Any:
        return self.cluster.kubectl(*args, **kwargs)

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def pods(self, deployment: str) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/name={deployment}"
        items: list[dict[str, Any]] = self.json("get", "pods", "-n", NAMESPACE, "-l", selector)[
            "items"
        ]
        return items

    def rollout_status(self, deployment: str) -> None:
        self.kubectl(
            "rollout", "status", f"deployment/{deployment}", "-n", NAMESPACE,
            f"--timeout={ROLLOUT_TIMEOUT_S}s", timeout=ROLLOUT_TIMEOUT_S + 10,
        )  # fmt: skip

    def events(self, reason: str) -> list[dict[str, Any]]:
        """The install namespace's core Events with `reason` (the kubelet's probe
        failures are `Unhealthy`)."""
        listed = self.json("get", "events", "-n", NAMESPACE, "--field-selector", f"reason={reason}")
        items: list[dict[str, Any]] = listed["items"]
        return items


def _with_exporter_crd(overlay: Path) -> None:
    """Add the `exporter-crd` component to the overlay, as the README says to."""
    path = overlay / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    kustomization.setdefault("components", []).append("../../components/exporter-crd")
    path.write_text(yaml.safe_dump(kustomization, sort_keys=False))


def install(cluster: NodeCluster, work: Path) -> Install:
    """Build, import, make the certificates, apply; wait until both Deployments are rolled
    out. Each step's time is in `timings`."""
    timings: dict[str, float] = {}

    def step(name: str, started: float) -> None:
        timings[name] = round(time.monotonic() - started, 1)

    started = time.monotonic()
    archive = build_product()  # what `make image` writes, buildah's layer cache on
    step("image built", started)

    started = time.monotonic()
    image = cluster.import_image(archive, product_image())
    step("image imported", started)

    tree = work / "tree"
    shutil.copytree(DEPLOY, tree / "deploy")
    shutil.copytree(REPO / "crds", tree / "crds")
    done = Install(cluster, tree, image, timings)
    # Not a local run's certificates (git-ignored, copied with the tree): the image makes them.
    shutil.rmtree(done.overlay / "certs", ignore_errors=True)
    (done.overlay / "ca-bundle.yaml").unlink(missing_ok=True)

    started = time.monotonic()
    options, _host, target, certs = documented_certs_run()
    assert options[options.index("--user") + 1] == "$(id -u):$(id -g)"
    with unpacked(archive, work / "image") as unpacked_image:
        made = unpacked_image.run(
            certs, mounts={target: done.overlay}, user=(os.getuid(), os.getgid())
        )
    assert made.returncode == 0, made.stderr
    step("certificates (the image's certs)", started)

    started = time.monotonic()
    install_lease_crd(cluster.plane)
    _with_exporter_crd(done.overlay)
    cluster.kubectl("apply", "-k", str(done.overlay))
    step("apply -k", started)

    started = time.monotonic()
    for deployment in DEPLOYMENTS:
        done.rollout_status(deployment)
    step("both Deployments rolled out", started)
    return done
