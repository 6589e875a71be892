"""Certificates without the dev environment: the image's `certs` command, run as
docs/install.md says (`docker run --user "$(id -u):$(id -g)" -v .../self-signed:/overlay IMAGE
certs ...`), writes the self-signed overlay's certificates and CA bundle into the
mounted folder; `kubectl kustomize` then renders a Secret and caBundles that match, and
running it again renews the serving certificate under the same CA."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from harness.deploy_render import DEPLOY, REPO, kubectl
from harness.images import Unpacked
from tests.installpage import documented_certs_run

pytestmark = pytest.mark.image

# The page's command: its options, mounted folder and arguments.
OPTIONS, HOST, TARGET, CERTS = documented_certs_run()


def render(overlay: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [str(kubectl()), "kustomize", str(overlay)], capture_output=True, text=True, check=True
    ).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def test_the_image_makes_the_self_signed_overlays_certificates(
    image: Unpacked, tmp_path: Path
) -> None:
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    shutil.copytree(REPO / "crds", tmp_path / "crds")
    overlay = tmp_path / HOST
    shutil.rmtree(overlay / "certs", ignore_errors=True)
    (overlay / "ca-bundle.yaml").unlink(missing_ok=True)
    assert OPTIONS[OPTIONS.index("--user") + 1] == "$(id -u):$(id -g)"
    me = (os.getuid(), os.getgid())

    first = image.run([*CERTS, "--days", "20"], mounts={TARGET: overlay}, user=me)
    assert first.returncode == 0, first.stderr
    print(first.stdout)
    assert "--out" in CERTS and CERTS[CERTS.index("--out") + 1] == f"{TARGET}/certs"
    ca = (overlay / "certs" / "ca.crt").read_bytes()
    serving = (overlay / "certs" / "tls.crt").read_bytes()
    objects = render(overlay)
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    assert base64.b64decode(secret["data"]["tls.crt"]) == serving  # type: ignore[index]
    bundles = {
        w["clientConfig"]["caBundle"]
        for o in objects
        if str(o["kind"]).endswith("WebhookConfiguration")
        for w in o["webhooks"]  # type: ignore[attr-defined]
    }
    assert bundles == {base64.b64encode(ca).decode()}
    issuer = x509.load_pem_x509_certificate(serving).issuer
    assert issuer == x509.load_pem_x509_certificate(ca).subject

    # Within 30 days of expiry: the same command reissues it, under the same CA.
    again = image.run(CERTS, mounts={TARGET: overlay}, user=me)
    assert again.returncode == 0, again.stderr
    print(again.stdout)
    assert (overlay / "certs" / "ca.crt").read_bytes() == ca
    renewed = (overlay / "certs" / "tls.crt").read_bytes()
    assert renewed != serving
    assert x509.load_pem_x509_certificate(renewed).issuer == issuer
