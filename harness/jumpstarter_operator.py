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

`--main` makes the same from main's source instead: main's operator, whose `Jumpstarter`
CRD has `spec.exporterSets`, and whose `config/crd` adds the ExporterSet and
VirtualTargetClass CRDs; its image is main's as `make jumpstarter-images` tags it
(`MAIN_OPERATOR_IMAGE`).

    python -m harness.jumpstarter_operator [--main] --out FOLDER  # then kubectl apply -k FOLDER
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
from harness.jumpstarter_build import MAIN_SOURCE, RELEASE_OPERATOR_SOURCE, Source
from harness.jumpstarter_images import MAIN_OPERATOR_IMAGE, OPERATOR_IMAGES

__all__ = [
    "CONFIG",
    "OPERATOR_DEPLOYMENT",
    "OPERATOR_NAMESPACE",
    "RELEASE_IMAGE",
    "kustomization",
    "main",
    "write",
]

CONFIG = "controller/deploy/operator/config"  # under the tarball's top folder
OPERATOR_NAMESPACE = "jumpstarter-operator-system"  # config/default's `namespace:`
OPERATOR_DEPLOYMENT = "jumpstarter-operator-controller-manager"  # its namePrefix + name


RELEASE_IMAGE = OPERATOR_IMAGES[-1]  # the release's tag, as its installer names it
assert RELEASE_IMAGE.endswith(f":{JUMPSTARTER_RELEASE}"), OPERATOR_IMAGES


def kustomization(image: str = RELEASE_IMAGE) -> dict[str, object]:
    """config/default with the operator's image tagged as `image`, as an installer."""
    repository, _, tag = image.rpartition(":")
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["config/default"],
        "images": [{"name": repository, "newTag": tag}],
    }


def write(out: Path, source: Source = RELEASE_OPERATOR_SOURCE, image: str = RELEASE_IMAGE) -> Path:
    """`out` holding `source`'s operator `config/` and the kustomization over it naming
    `image` (anything there before is replaced)."""
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
    text = yaml.safe_dump(kustomization(image), sort_keys=False)
    (out / "kustomization.yaml").write_text(text)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.jumpstarter_operator", description=__doc__
    )
    parser.add_argument("--out", type=Path, required=True, help="the folder to write")
    parser.add_argument("--main", action="store_true", help="main's operator, not 0.9.0's")
    args = parser.parse_args(argv)
    try:
        if args.main:
            print(write(args.out, MAIN_SOURCE, MAIN_OPERATOR_IMAGE))
        else:
            print(write(args.out))
    except (OSError, LookupError, tarfile.TarError) as error:
        print(f"jumpstarter operator: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
