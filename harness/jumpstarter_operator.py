"""Jumpstarter 0.9.0's operator install, the manifests its release ships, for `kubectl apply -k`.

The release publishes `operator-installer.yaml`, the rendering of its operator's
`controller/deploy/operator/config/default` with the operator image set to the release's
(`make build-installer` in controller/deploy/operator writes `IMG`,
`quay.io/jumpstarter-dev/jumpstarter-operator:0.9.0`, into config/manager). This machine
cannot download it, so it is made from the same source: the release tarball's
`config/` folder, unpacked into a folder, beside a kustomization that renders
`config/default` with that image tag. As shipped, `config/manager/kustomization.yaml`
still names `0.8.1-rc.1`; the manager's `imagePullPolicy` is already `IfNotPresent`, so
the image `make jumpstarter-images` imports into the node is run, nothing is pulled.

It installs the namespace `jumpstarter-operator-system`, the `Jumpstarter` CRD and the
release's `jumpstarter.dev` CRDs (clients, exporters, leases, exporteraccesspolicies),
the operator's RBAC and its Deployment `jumpstarter-operator-controller-manager`.

    python -m harness.jumpstarter_operator --out FOLDER    # then kubectl apply -k FOLDER
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from api.jumpstarter import JUMPSTARTER_RELEASE
from harness.jumpstarter_build import RELEASE_OPERATOR_SOURCE, Source
from harness.jumpstarter_images import OPERATOR_IMAGES

__all__ = ["CONFIG", "OPERATOR_DEPLOYMENT", "OPERATOR_NAMESPACE", "kustomization", "main", "write"]

CONFIG = "controller/deploy/operator/config"  # under the tarball's top folder
OPERATOR_NAMESPACE = "jumpstarter-operator-system"  # config/default's `namespace:`
OPERATOR_DEPLOYMENT = "jumpstarter-operator-controller-manager"  # its namePrefix + name


def kustomization() -> dict[str, object]:
    """The release's config/default with the release's operator tag, as its installer."""
    repository, _, tag = OPERATOR_IMAGES[-1].rpartition(":")
    assert tag == JUMPSTARTER_RELEASE, OPERATOR_IMAGES
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["config/default"],
        "images": [{"name": repository, "newTag": tag}],
    }


def write(out: Path, source: Source = RELEASE_OPERATOR_SOURCE) -> Path:
    """`out` holding the release's operator `config/` and the kustomization over it
    (anything there before is replaced)."""
    prefix = f"{source.top}/{CONFIG}/"
    shutil.rmtree(out / "config", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(source.tarball()) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        if not members:
            raise LookupError(f"{source.tarball()} holds no {prefix}")
        for member in members:
            member.name = "config/" + member.name.removeprefix(prefix)
        archive.extractall(out, members=members, filter="data")
    text = yaml.safe_dump(kustomization(), sort_keys=False)
    (out / "kustomization.yaml").write_text(text)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.jumpstarter_operator", description=__doc__
    )
    parser.add_argument("--out", type=Path, required=True, help="the folder to write")
    args = parser.parse_args(argv)
    try:
        print(write(args.out))
    except (OSError, LookupError, tarfile.TarError) as error:
        print(f"jumpstarter operator: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
