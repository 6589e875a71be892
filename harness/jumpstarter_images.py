"""Jumpstarter's own container images, release 0.9.0's and main's, built here without a
registry.

The release builds two images, and main the same two from its own source:
`controller/Containerfile` (the controller manager and the router in one image) and
`controller/Containerfile.operator` (the operator). Each is a Go builder stage on a UBI
go-toolset image and a final stage on ubi-micro, both from a registry this machine cannot
reach. Here the Go programs are `harness.jumpstarter_build`'s (the controller and router
`make jumpstarter` builds, the operators and main's controller and router built and
cached the same way), and each image is its Containerfile's own final stage, read from
the tarball and changed in two places only: it starts from the project's debootstrap base
(`harness.images`), and what it copies from the builder stage comes from the build
context, at the builder's paths. Its working folder, files, user and entrypoint are the
source's. The programs are linked against the build machine's glibc and run on the
base's (the release links them statically, `CGO_ENABLED=0`); the image test runs each one
in its image.

Each image is a docker-archive in the images cache, tagged with the names the release's
manifests run it by (`CONTROLLER_IMAGE`, `OPERATOR_IMAGES`), so that Deployments with
`imagePullPolicy: IfNotPresent` find it in the node's containerd and pull nothing
(`harness.nodeimages.import_archive`). An archive is built once per set of inputs (the
base, the stage, the names, the programs' bytes), like the QEMU exporter image.

    python -m harness.jumpstarter_images    # all five (`make jumpstarter-controller-images`)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import io
import json
import re
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from api.jumpstarter import JUMPSTARTER_RELEASE
from harness.images import (
    CACHE,
    ImageError,
    base_name,
    build,
    build_once,
    ensure_base,
    link_into,
    report_builds,
)
from harness.jumpstarter_build import (
    MAIN_JUMPSTARTER_SOURCE,
    MAIN_SOURCE,
    RELEASE_OPERATOR_SOURCE,
    RELEASE_SOURCE,
    JumpstarterBuild,
    JumpstarterBuildError,
    Source,
)
from harness.jumpstarter_build import build as build_binaries

__all__ = [
    "CONTROLLER",
    "CONTROLLER_IMAGE",
    "IMAGES",
    "MAIN_CONTROLLER",
    "MAIN_EXPORTERSET_CONTROLLER",
    "MAIN_EXPORTERSET_CONTROLLER_IMAGE",
    "MAIN_IMAGES",
    "MAIN_OPERATOR",
    "MAIN_OPERATOR_IMAGE",
    "OPERATOR",
    "OPERATOR_IMAGES",
    "RELEASE_IMAGES",
    "ReleaseImage",
    "build_image",
    "final_stage",
    "main",
    "release_file",
]

# The controller's and the routers' image: the `Jumpstarter` CR's default of
# spec.controller.image and spec.routers.image (controller/deploy/operator/api/v1alpha1/
# jumpstarter_types.go:261 and :226; its CRD, config/crd/bases/
# operator.jumpstarter.dev_jumpstarters.yaml:862 and :1647), which the operator copies into
# the Deployments it renders (internal/controller/jumpstarter/jumpstarter_controller.go:819
# and :1016). The release's sample CR (config/samples/operator_v1alpha1_jumpstarter.yaml)
# names no image, and its deploy script names this one (controller/hack/deploy_vars:8).
CONTROLLER_IMAGE = "quay.io/jumpstarter-dev/jumpstarter-controller:latest"
# The operator's image: its manager manifest's (controller/deploy/operator/config/manager/
# manager.yaml:66), and the release build's `IMG`, `$(IMAGE_TAG_BASE):$(VERSION)`
# (controller/deploy/operator/Makefile:65, :44, :6), which its `make deploy` and
# `make build-installer` write into that manifest (Makefile:227, :208).
OPERATOR_IMAGES = (
    "quay.io/jumpstarter-dev/jumpstarter-operator:latest",
    f"quay.io/jumpstarter-dev/jumpstarter-operator:{JUMPSTARTER_RELEASE}",
)

_COPY_FROM_BUILDER = re.compile(r"COPY\s+--from=builder\s+(?P<source>/\S+)\s+(?P<target>\S+)")


@dataclass(frozen=True)
class ReleaseImage:
    """One of the release's images: its Containerfile (in the tarball's top folder), the
    build whose programs it holds, each program by the builder-stage path the final stage
    copies it from, and the names it is tagged with."""

    key: str  # names its archive, CACHE/jumpstarter-<key>.tar
    containerfile: str
    source: Source
    programs: Mapping[str, str]  # builder-stage path -> the build's binary
    names: tuple[str, ...]

    def archive(self, cache: Path = CACHE) -> Path:
        return cache / f"jumpstarter-{self.key}.tar"


CONTROLLER = ReleaseImage(
    key="controller",
    containerfile="controller/Containerfile",
    source=RELEASE_SOURCE,
    # `-o manager cmd/main.go` and `-o router cmd/router/main.go` in WORKDIR /build
    programs={"/build/manager": "controller", "/build/router": "router"},
    names=(CONTROLLER_IMAGE,),
)
OPERATOR = ReleaseImage(
    key="operator",
    containerfile="controller/Containerfile.operator",
    source=RELEASE_OPERATOR_SOURCE,
    # `cd deploy/operator && go build -o manager cmd/main.go` in the go-toolset's home
    programs={"/opt/app-root/src/deploy/operator/manager": "operator"},
    names=OPERATOR_IMAGES,
)
# Main's operator's image. Main has no release: its build's `IMG` is still
# `$(IMAGE_TAG_BASE):$(VERSION)` with VERSION 0.8.1-rc.1 (controller/deploy/operator/Makefile:6,
# :68), the same name as a release candidate's, so it is tagged by its commit instead, the
# way a user of main sets `IMG`; `harness.jumpstarter_operator --main` writes that tag.
MAIN_OPERATOR_IMAGE = "quay.io/jumpstarter-dev/jumpstarter-operator:main-b1f2bb4"
# Main's two, from the same Containerfiles of main's source. Main's `Jumpstarter` CR has
# the release's default of the controller's and routers' image (its api/v1alpha1/
# jumpstarter_types.go:282, :320): on a node, one of the two is imported.
MAIN_CONTROLLER = dataclasses.replace(
    CONTROLLER, key="main-controller", source=MAIN_JUMPSTARTER_SOURCE
)
MAIN_OPERATOR = dataclasses.replace(
    OPERATOR, key="main-operator", source=MAIN_SOURCE, names=(MAIN_OPERATOR_IMAGE,)
)
# Main's own exporter-set controller, which its operator runs for each provisioner by
# default (`exporterSets.image`'s default, the operator's api/v1alpha1/jumpstarter_types.go),
# from main's `controller/Containerfile.exporter-set-controller`.
MAIN_EXPORTERSET_CONTROLLER_IMAGE = (
    "quay.io/jumpstarter-dev/jumpstarter-exporterset-controller:latest"
)
MAIN_EXPORTERSET_CONTROLLER = ReleaseImage(
    key="main-exporterset-controller",
    containerfile="controller/Containerfile.exporter-set-controller",
    source=MAIN_SOURCE,
    # `-o exporter-set-controller cmd/exporter-set-controller/main.go` in WORKDIR /build
    programs={"/build/exporter-set-controller": "exporter-set-controller"},
    names=(MAIN_EXPORTERSET_CONTROLLER_IMAGE,),
)
RELEASE_IMAGES = (CONTROLLER, OPERATOR)
MAIN_IMAGES = (MAIN_CONTROLLER, MAIN_OPERATOR)  # what main's operator runs this product beside
IMAGES = (*RELEASE_IMAGES, *MAIN_IMAGES, MAIN_EXPORTERSET_CONTROLLER)


def release_file(path: str, source: Source = RELEASE_SOURCE) -> str:
    """The text of `path` (under the tarball's top folder) in `source`'s tarball."""
    name = f"{source.top}/{path}"
    with tarfile.open(source.tarball()) as archive:
        try:
            stream = archive.extractfile(name)
        except KeyError:
            stream = None
        if stream is None:
            raise ImageError(f"{source.tarball()} holds no file {name}")
        return stream.read().decode()


def final_stage(containerfile: str, base: str, programs: Mapping[str, str]) -> str:
    """The Containerfile's last stage on `base`, copying from the build context (at the
    builder's paths, made relative) what it copies from the builder stage; every other
    line as it is."""
    lines = containerfile.splitlines()
    start = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    stage, copied = [f"FROM {base}"], set()
    for line in lines[start + 1 :]:
        copy = _COPY_FROM_BUILDER.fullmatch(line.strip())
        if copy:
            copied.add(copy["source"])
            line = f"COPY {copy['source'].lstrip('/')} {copy['target']}"
        elif "--from" in line:
            raise ImageError(f"the final stage copies from elsewhere: {line.strip()}")
        stage.append(line)
    if copied != set(programs):
        raise ImageError(f"the final stage copies {sorted(copied)}, not {sorted(programs)}")
    return "\n".join(stage) + "\n"


def _digest(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _tag(archive: Path, names: Sequence[str]) -> None:
    """Give the docker-archive's one image every name in `names` (`buildah push` writes
    one); `ctr images import` makes an image of each."""
    retagged = archive.with_name(archive.name + ".partial")
    with tarfile.open(archive) as source, tarfile.open(retagged, "w") as target:
        for member in source:
            stream = source.extractfile(member) if member.isfile() else None
            if member.name == "manifest.json" and stream is not None:
                (entry,) = json.load(stream)
                data = json.dumps([{**entry, "RepoTags": list(names)}]).encode()
                member.size, stream = len(data), io.BytesIO(data)
            target.addfile(member, stream)
    retagged.replace(archive)


def build_image(image: ReleaseImage, *, layer_cache: bool = True, cache: Path = CACHE) -> Path:
    """`image`'s archive, built unless one from the same inputs is there (with the layer
    cache); its programs are built first if they are not."""
    try:
        binaries = build_binaries(image.source)
    except JumpstarterBuildError as error:
        raise ImageError(str(error)) from None
    base = base_name()
    stage = final_stage(release_file(image.containerfile, image.source), base, image.programs)
    archive = image.archive(cache)
    inputs = hashlib.sha256(f"{stage}{' '.join(image.names)}".encode())
    for path, program in sorted(image.programs.items()):
        inputs.update(f"{path} {_digest(binaries.binary(program))}".encode())

    def make() -> None:
        ensure_base(cache)  # the stage starts from it
        _build(image, stage, binaries, archive, layer_cache, cache)

    return build_once(
        archive,
        inputs.hexdigest(),
        ", ".join(image.names),
        make,
        layer_cache=layer_cache,
        cache=cache,
    )


def _build(
    image: ReleaseImage,
    stage: str,
    binaries: JumpstarterBuild,
    archive: Path,
    layer_cache: bool,
    cache: Path,
) -> None:
    """Build `stage` into `archive` from a context holding the programs at the builder's
    paths (linked, not copied, where they can be)."""
    with tempfile.TemporaryDirectory(prefix="context-", dir=cache) as folder:
        context = Path(folder)
        (context / "Containerfile").write_text(stage)
        for path, program in image.programs.items():
            link_into(binaries.binary(program), context / path.lstrip("/"))
        build(
            context,
            archive,
            image.names[0],
            dockerfile=context / "Containerfile",
            layer_cache=layer_cache,
            cache=cache,
        )
    if len(image.names) > 1:
        _tag(archive, image.names)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.jumpstarter_images", description=__doc__
    )
    parser.add_argument("--cache", type=Path, default=CACHE, help="the cache folder")
    args = parser.parse_args(argv)
    builds = [
        (", ".join(i.names), functools.partial(build_image, i, cache=args.cache)) for i in IMAGES
    ]
    if report_builds("images", builds):
        return 1
    imports = "".join(f"\n  ctr -n k8s.io images import {i.archive(args.cache)}" for i in IMAGES)
    print(f"images: import into a node's containerd with{imports}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
