"""Render a `deploy/` overlay to objects, the way `kubectl apply -k` would.

The tests check the rendered objects, and the loopback harness registers the webhook
from the rendered webhook configurations: so what a cluster installs is what is tested.
For the loopback case the Service reference is replaced by a URL (kube-apiserver outside
a cluster cannot reach a Service) and the CA bundle is set to the harness's CA.

Rendering works on a copy of `deploy/` and `crds/`: when the self-signed overlay has
no certificates yet (they are git-ignored), throwaway ones are made in the copy, so
rendering never writes into the working tree. An overlay of one's own over a shipped one
(docs/install.md, "Your own overlay") is rendered from its kustomization, written into
the copy where the page puts it (`render_kustomization`).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from certs.authority import ensure_certificates
from certs.overlay import CA_BUNDLE_FILE, write_ca_bundle

__all__ = [
    "DEPLOY",
    "OVERLAYS",
    "OWN_OVERLAY",
    "REPO",
    "WEBHOOK_CONFIGURATION_KINDS",
    "WEBHOOK_NAMESPACE",
    "WEBHOOK_ONLY_OVERLAY",
    "WEBHOOK_SERVICE",
    "RenderError",
    "container_args",
    "kubectl",
    "own_overlay",
    "render_kustomization",
    "render_overlay",
]

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
# The shipped overlays of a whole install, each installed as it is (the third: the first
# plus the Exporter CRD).
OVERLAYS = ("self-signed", "cert-manager", "self-signed-exporter-crd")
# The self-signed overlay less the CRDs and the reconciler: the webhook beside Jumpstarter
# main's operator, which installs the CRDs and runs this product's image as its controller.
WEBHOOK_ONLY_OVERLAY = "webhook-self-signed"
# Where docs/install.md puts an overlay of one's own, beside the shipped ones.
OWN_OVERLAY = "overlays/mine"
# The names the manifests use; a test checks that deploy/ agrees.
WEBHOOK_NAMESPACE = "virtualtarget-system"
WEBHOOK_SERVICE = "virtualtarget-webhook"
WEBHOOK_CONFIGURATION_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
SELF_SIGNED_CERTS = "certs"  # the overlay's folder the secretGenerator reads


class RenderError(RuntimeError):
    """kubectl is missing or kustomize refused the overlay; the message says which."""


def kubectl() -> Path:
    """The kubectl built by `make control-plane`, else the one on PATH."""
    built = Path(os.environ.get("VIRTUALTARGET_BIN_DIR", REPO / ".bin")) / "kubectl"
    if built.is_file():
        return built
    found = shutil.which("kubectl")
    if found is None:
        raise RenderError(
            f"kubectl not found in {built.parent} or on PATH; run `make control-plane`"
        )
    return Path(found)


def _prepare_self_signed(overlay: Path, ca_bundle: bytes | None) -> None:
    certs = overlay / SELF_SIGNED_CERTS
    if not (certs / "tls.crt").is_file():
        made = ensure_certificates(certs, WEBHOOK_SERVICE, WEBHOOK_NAMESPACE)
        write_ca_bundle(overlay, made.ca_pem)
    if ca_bundle is not None:
        write_ca_bundle(overlay, ca_bundle)
    elif not (overlay / CA_BUNDLE_FILE).is_file():
        write_ca_bundle(overlay, (certs / "ca.crt").read_bytes())


def _point_at(objects: list[dict[str, Any]], url: str | None, ca_bundle: bytes | None) -> None:
    for obj in objects:
        if obj.get("kind") not in WEBHOOK_CONFIGURATION_KINDS:
            continue
        for hook in obj.get("webhooks", []):
            config = hook["clientConfig"]
            if url is not None:
                path = config.pop("service").get("path", "")
                config["url"] = url.rstrip("/") + path
            if ca_bundle is not None:
                config["caBundle"] = base64.b64encode(ca_bundle).decode()


def own_overlay(overlay: str, components: Sequence[str]) -> dict[str, Any]:
    """The kustomization of an overlay of one's own at `OWN_OVERLAY`: the shipped
    `overlay` plus `deploy/components/NAME`s."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"../{overlay}"],
        "components": [f"../../components/{c}" for c in components],
    }


def container_args(objects: Sequence[dict[str, Any]], deployment: str) -> list[str]:
    """The args of the first container of the rendered Deployment `deployment`."""
    for obj in objects:
        if obj.get("kind") == "Deployment" and obj["metadata"]["name"] == deployment:
            args: list[str] = obj["spec"]["template"]["spec"]["containers"][0].get("args", [])
            return list(args)
    raise RenderError(f"no Deployment {deployment} rendered")


def render_overlay(
    name: str,
    *,
    webhook_url: str | None = None,
    ca_bundle: bytes | None = None,
    components: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/overlays/NAME` renders.

    `webhook_url` (`https://127.0.0.1:9443`) replaces each webhook's Service reference
    with that URL plus the webhook's path; `ca_bundle` (PEM) becomes every caBundle;
    `components` names optional `deploy/components/` to add (`monitoring`), as an
    overlay of one's own over this one adds them.
    """
    if name not in (*OVERLAYS, WEBHOOK_ONLY_OVERLAY):
        known = ", ".join((*OVERLAYS, WEBHOOK_ONLY_OVERLAY))
        raise RenderError(f"unknown overlay {name!r}; known: {known}")
    if components:
        return render_kustomization(
            own_overlay(name, components), webhook_url=webhook_url, ca_bundle=ca_bundle
        )
    return _render(f"overlays/{name}", None, webhook_url, ca_bundle)


def render_kustomization(
    document: Mapping[str, Any],
    *,
    at: str = OWN_OVERLAY,
    webhook_url: str | None = None,
    ca_bundle: bytes | None = None,
) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/AT` renders with `document` written there as
    its kustomization.yaml (an overlay of one's own; `at` is relative to `deploy/`)."""
    return _render(at, document, webhook_url, ca_bundle)


def _render(
    at: str,
    document: Mapping[str, Any] | None,
    webhook_url: str | None,
    ca_bundle: bytes | None,
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="virtualtarget-render-") as tmp:
        root = Path(tmp)
        shutil.copytree(DEPLOY, root / "deploy")
        shutil.copytree(REPO / "crds", root / "crds")
        # Every overlay but cert-manager's reads the self-signed overlay's certificates.
        _prepare_self_signed(root / "deploy" / "overlays" / "self-signed", ca_bundle)
        target = root / "deploy" / at
        if document is not None:
            target.mkdir(parents=True, exist_ok=True)
            (target / "kustomization.yaml").write_text(yaml.safe_dump(dict(document)))
        done = subprocess.run(
            [str(kubectl()), "kustomize", str(target)], capture_output=True, text=True
        )
    if done.returncode != 0:
        raise RenderError(f"kubectl kustomize deploy/{at}: {done.stderr.strip()}")
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    _point_at(objects, webhook_url, ca_bundle)
    return objects
