"""The release (`make release`: `dist/VERSION/`) installed on a node cluster with both
reconcilers, as docs/install.md's "KubeVirt pools" has it: the release's `kustomize/`
copied, the self-signed overlay's certificates made, and the page's own overlay (the
self-signed overlay with the `kubevirt` component) applied, its product image imported
from the release's archive by digest as the page imports it.

On the shared node cluster other modules run pools under reconcilers of their own, so
this install is narrowed there, and only there, to what the test gives it: the QEMU
reconciler to one namespace (`scoped`), the webhooks to the namespaces carrying
`ADMITTED` (their `namespaceSelector`), and its Pods' CPU requests to `SHARED_CPU`. The
KubeVirt reconciler serves every namespace as shipped: no other module has a KubeVirt
pool."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.deploy_render import REPO
from harness.node import NodeCluster
from harness.rbac import generate_scope
from harness.release import DIST, PRODUCT_REPOSITORY, tree_version
from tests.docpages import files
from tests.installpage import PAGE
from tests.node.install import NAMESPACE, RECONCILER, ROLLOUT_TIMEOUT_S, WEBHOOK

QEMU_RECONCILER, KUBEVIRT_RECONCILER = RECONCILER, "virtualtarget-kubevirt-reconciler"
DEPLOYMENTS = (WEBHOOK, QEMU_RECONCILER, KUBEVIRT_RECONCILER)
ADMITTED = "virtualtarget.jumpstarter.dev/test-admission"  # the webhooks' namespaces here
OWN_OVERLAY = "deploy/overlays/mine/kustomization.yaml"
SHARED_CPU = "10m"


def release_folder() -> Path:
    """The working tree's release, as `make test` built it before the tests."""
    release = DIST / tree_version(REPO)
    assert (release / "SHA256SUMS").is_file(), f"no {release}: run `make release`"
    return release


def import_product(cluster: NodeCluster, release: Path) -> str:
    """The release's product archive into the node's containerd under the name by digest
    its manifests use (`--digests --base-name`, as docs/install.md imports it)."""
    (product,) = [
        image
        for image in json.loads((release / "images.json").read_text())["images"].values()
        if any(name.startswith(PRODUCT_REPOSITORY + ":") for name in image["names"])
    ]
    subprocess.run(
        ["ctr", "--address", str(cluster.containerd_socket), "-n", "k8s.io", "images",
         "import", "--digests", "--base-name", PRODUCT_REPOSITORY,
         str(release / product["archive"])],
        check=True, capture_output=True,
    )  # fmt: skip
    return f"{PRODUCT_REPOSITORY}@{product['digest']}"


def kubevirt_overlay_text() -> str:
    """The page's own overlay that adds the KubeVirt reconciler."""
    (block,) = [b for b in files(PAGE, OWN_OVERLAY) if "components/kubevirt" in b.text]
    return block.text


def scoped(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The QEMU reconciler serving `namespace` alone: its `--namespace`, and the Role and
    RoleBinding there that a scope component generated for it holds
    (`harness.rbac.generate_scope`: Secrets are listed and watched only where it serves).
    Not that component itself: its Deployment patch would reach the KubeVirt reconciler
    too, the base's reconciler renamed (kustomize matches a target by its earlier name)."""
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == QEMU_RECONCILER:
            obj["spec"]["template"]["spec"]["containers"][0]["args"].append(
                f"--namespace={namespace}"
            )
    roles = yaml.safe_load_all(generate_scope([namespace])["roles.yaml"])
    return [*objects, *(o for o in roles if o)]


def make_certificates(overlay: Path) -> None:
    """The self-signed overlay's certificates, made as the page makes them."""
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "virtualtarget"), "certs", "--out", str(overlay / "certs"),
         "--service", WEBHOOK, "--namespace", NAMESPACE, "--kustomize-overlay", str(overlay)],
        check=True, capture_output=True,
    )  # fmt: skip


def narrowed(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered install, its webhooks admitting in the namespaces labelled `ADMITTED`
    alone, and its Pods asking for `SHARED_CPU` each (the shared node's cores are
    scheduled to other modules' guests; six Pods at the shipped 50m would take 0.3 of
    them)."""
    for obj in objects:
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container["resources"]["requests"]["cpu"] = SHARED_CPU
        if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for webhook in obj["webhooks"]:
                webhook["namespaceSelector"] = {"matchLabels": {ADMITTED: "true"}}
    return objects


@dataclass(frozen=True)
class InstalledReconciler:
    """A reconciler Deployment of the install, read as a pool reads its reconciler."""

    cluster: NodeCluster
    deployment: str

    def log_tail(self, lines: int = 10) -> str:
        shown = self.cluster.kubectl(
            "logs", f"deployment/{self.deployment}", "-n", NAMESPACE, f"--tail={lines}",
            check=False,
        )  # fmt: skip
        return "\n  ".join((shown.stdout + shown.stderr).splitlines())

    def check_alive(self) -> None:
        """Every Pod of the Deployment ready, none restarted."""
        pods = json.loads(
            self.cluster.kubectl(
                "get", "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={self.deployment}",
                "-o", "json",
            ).stdout
        )["items"]  # fmt: skip
        restarts = {
            p["metadata"]["name"]: s["restartCount"]
            for p in pods
            for s in (p.get("status") or {}).get("containerStatuses") or []
            if s["restartCount"]
        }
        assert pods and not restarts, f"{self.deployment}: restarts {restarts}\n{self.log_tail(40)}"


@dataclass
class ReleaseInstall:
    cluster: NodeCluster
    release: Path
    image: str  # the product, by digest
    objects: list[dict[str, Any]]
    seconds: float  # the apply to every Deployment rolled out

    def reconciler(self, deployment: str) -> InstalledReconciler:
        return InstalledReconciler(self.cluster, deployment)

    def service_account(self, deployment: str) -> str:
        """The user its Pods act as (`kubectl auth can-i --as`)."""
        (found,) = [
            o for o in self.objects
            if o["kind"] == "Deployment" and o["metadata"]["name"] == deployment
        ]  # fmt: skip
        account = found["spec"]["template"]["spec"]["serviceAccountName"]
        return f"system:serviceaccount:{NAMESPACE}:{account}"

    def json(self, *args: str) -> Any:
        return json.loads(self.cluster.kubectl(*args, "-o", "json").stdout)

    def pods(self, deployment: str) -> list[dict[str, Any]]:
        """The Deployment's Pods not being deleted."""
        selector = f"app.kubernetes.io/name={deployment}"
        items = self.json("get", "pods", "-n", NAMESPACE, "-l", selector)["items"]
        return [p for p in items if "deletionTimestamp" not in p["metadata"]]


@contextmanager
def release_installed(
    cluster: NodeCluster, work: Path, qemu_namespace: str
) -> Iterator[ReleaseInstall]:
    """The release with both reconcilers on `cluster` (narrowed: `narrowed`), until the
    block ends; then its objects deleted, the CRDs kept (other modules' pools use them)."""
    release = release_folder()
    image = import_product(cluster, release)
    tree = work / "release"
    shutil.copytree(release / "kustomize", tree)
    make_certificates(tree / "deploy" / "overlays" / "self-signed")
    own = tree / OWN_OVERLAY
    own.parent.mkdir(parents=True)
    own.write_text(kubevirt_overlay_text())
    rendered = cluster.kubectl("kustomize", str(own.parent)).stdout
    objects = scoped(narrowed([o for o in yaml.safe_load_all(rendered) if o]), qemu_namespace)
    started = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": objects}))  # fmt: skip
    try:
        for deployment in DEPLOYMENTS:
            cluster.kubectl(
                "rollout", "status", f"deployment/{deployment}", "-n", NAMESPACE,
                f"--timeout={ROLLOUT_TIMEOUT_S}s", timeout=ROLLOUT_TIMEOUT_S + 10,
            )  # fmt: skip
        yield ReleaseInstall(cluster, release, image, objects, time.monotonic() - started)
    finally:
        kept = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
        cluster.kubectl(
            "delete", "-f", "-", "--ignore-not-found", "--wait=false",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": kept}), check=False,
        )  # fmt: skip
