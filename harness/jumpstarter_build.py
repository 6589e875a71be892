"""Jumpstarter's own Go programs, built from the source tarballs in `../shared/vendor`.

Two tarballs, one build description each (`SOURCES`), one mechanism:

- `RELEASE_SOURCE`: the 0.9.0 release's controller manager and router, which the tests and
  `make run` run (`jumpstarter-0.9.0-controller.tar.gz`, or the tarball
  `JUMPSTARTER_SOURCE` names), with its `jumpstarter.dev` CRDs;
- `MAIN_SOURCE`: main's exporter-set controller and operator, the only upstream
  exporter-set controller there is, which the takeover test runs
  (`jumpstarter-main-b1f2bb4-controller.tar.gz`, or `JUMPSTARTER_MAIN_SOURCE`), with the
  ExporterSet and VirtualTargetClass CRDs its operator installs (its controller reads those
  kinds through its own Go types);
- `RELEASE_OPERATOR_SOURCE`: the 0.9.0 release's operator, from the release's tarball, with
  its `Jumpstarter` CRD, for the release's images (`harness.jumpstarter_images`);
- `MAIN_JUMPSTARTER_SOURCE`: main's controller manager and router, for the images main's
  operator deploys. `make jumpstarter` leaves these two out (`DEFAULT_KEYS`): only the
  images run them, and `make jumpstarter-images` builds what an image needs.

Jumpstarter's Go modules are not on the module proxy, but every dependency is. A build is
cached beside the control plane's binaries under a key made from its tarball's digest
and the build's flags (`harness.gobuild`), `.bin/jumpstarter-<key>/`
(`jumpstarter-<key>-<part>/` for a second part of one tarball): the binaries and `crds/`.
A folder is complete once its `BUILT` stamp exists, so an interrupted build is done again.
Figures: docs/measurements.md.

    python -m harness.jumpstarter_build           # what `make jumpstarter` runs: release, main
    python -m harness.jumpstarter_build operator  # one of them, by its key
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.controlplane import REPO_ROOT, binary_dir
from harness.gobuild import build_flags

__all__ = [
    "DEFAULT_KEYS",
    "MAIN_JUMPSTARTER_SOURCE",
    "MAIN_SOURCE",
    "RELEASE",
    "RELEASE_OPERATOR_SOURCE",
    "RELEASE_SOURCE",
    "SOURCES",
    "Binary",
    "JumpstarterBuild",
    "JumpstarterBuildError",
    "Source",
    "build",
    "built",
    "source_tarball",
]

_STAMP = "BUILT"
_CRD_DIR = "controller/deploy/operator/config/crd/bases"  # what the operator installs


@dataclass(frozen=True)
class Binary:
    """One program: `go build` of `package` in the Go module at `module` (a folder of the
    tarball's top folder), written as `name`."""

    name: str
    package: str
    module: str = "controller"


@dataclass(frozen=True)
class Source:
    """A tarball and what is built from it."""

    key: str  # names it on the command line and in its build log
    what: str  # for messages
    top: str  # the tarball's top folder
    tarball_env: str  # names another tarball
    commit: str
    version: str  # `main.version`; empty leaves the source's own default
    binaries: tuple[Binary, ...]
    crds: tuple[str, ...]  # from _CRD_DIR
    archive: str  # how the tarball was made, for the message when it is missing
    part: str = ""  # names the cache folder of a second build from the same tarball

    def tarball(self) -> Path:
        default = REPO_ROOT.parent / "shared" / "vendor" / f"{self.top}-controller.tar.gz"
        return Path(os.environ.get(self.tarball_env, default))

    def ldflags(self) -> str:
        flags = [f"-X main.gitCommit={self.commit}"]
        if self.version:
            flags.insert(0, f"-X main.version={self.version}")
        return " ".join(flags)


RELEASE = "v0.9.0"
RELEASE_SOURCE = Source(
    key="release",
    what=f"Jumpstarter's {RELEASE} controller and router",
    top="jumpstarter-0.9.0",
    tarball_env="JUMPSTARTER_SOURCE",
    commit="a084412198a554514ecba40be0bd6d4e53c2d9e7",  # the tag, ../shared/vendor/README.md
    version=RELEASE,
    binaries=(Binary("controller", "./cmd/"), Binary("router", "./cmd/router")),
    # The kinds Jumpstarter's controller serves (the operator's own CRD is not needed).
    crds=(
        "jumpstarter.dev_clients.yaml",
        "jumpstarter.dev_exporteraccesspolicies.yaml",
        "jumpstarter.dev_exporters.yaml",
        "jumpstarter.dev_leases.yaml",
    ),
    archive=f"git archive {RELEASE} controller LICENSE e2e",
)
MAIN_SOURCE = Source(
    key="main",
    what="Jumpstarter main's exporter-set controller and operator",
    top="jumpstarter-main-b1f2bb4",
    tarball_env="JUMPSTARTER_MAIN_SOURCE",
    commit="b1f2bb41aac09cda79a2afa4b2f4fe07f3c6b0ea",  # ../shared/vendor/README.md
    version="",  # an untagged commit: "dev", as a plain `go build` of it says
    binaries=(
        Binary("exporter-set-controller", "./cmd/exporter-set-controller"),
        # a module of its own, with `replace .../controller => ../../`
        Binary("operator", "./cmd", module="controller/deploy/operator"),
    ),
    crds=(
        "virtualtarget.jumpstarter.dev_exportersets.yaml",
        "virtualtarget.jumpstarter.dev_virtualtargetclasses.yaml",
    ),
    archive="git archive --prefix=jumpstarter-main-b1f2bb4/ b1f2bb41 controller LICENSE e2e",
)
RELEASE_OPERATOR_SOURCE = dataclasses.replace(
    RELEASE_SOURCE,
    key="operator",
    what=f"Jumpstarter's {RELEASE} operator",
    # a module of its own, with `replace .../jumpstarter-controller => ../../`
    binaries=(Binary("operator", "./cmd", module="controller/deploy/operator"),),
    crds=("operator.jumpstarter.dev_jumpstarters.yaml",),
    part="operator",
)
MAIN_JUMPSTARTER_SOURCE = dataclasses.replace(
    MAIN_SOURCE,
    key="main-jumpstarter",
    what="Jumpstarter main's controller and router",
    # what main's operator deploys beside its exporter-set controllers (its images only)
    binaries=RELEASE_SOURCE.binaries,
    crds=(),
    part="jumpstarter",
)
SOURCES = {
    source.key: source
    for source in (RELEASE_SOURCE, MAIN_SOURCE, RELEASE_OPERATOR_SOURCE, MAIN_JUMPSTARTER_SOURCE)
}
DEFAULT_KEYS = (RELEASE_SOURCE.key, MAIN_SOURCE.key)  # what the tests run


class JumpstarterBuildError(RuntimeError):
    """The build cannot run or failed; the message says why and what to run."""


def source_tarball(source: Source = RELEASE_SOURCE) -> Path:
    return source.tarball()


@dataclass(frozen=True)
class JumpstarterBuild:
    """Where one built tarball lives."""

    directory: Path
    source: Source = RELEASE_SOURCE

    def binary(self, name: str) -> Path:
        return self.directory / name

    @property
    def controller(self) -> Path:
        return self.binary("controller")

    @property
    def router(self) -> Path:
        return self.binary("router")

    @property
    def crds(self) -> list[Path]:
        return [self.directory / "crds" / name for name in self.source.crds]

    @property
    def complete(self) -> bool:
        return (self.directory / _STAMP).exists()


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()[:16]


def _cached(source: Source) -> JumpstarterBuild:
    tarball = source.tarball()
    if not tarball.is_file():
        raise JumpstarterBuildError(
            f"jumpstarter: no source of {source.what} at {tarball}; set {source.tarball_env} "
            f"to its tarball (`{source.archive}`)"
        )
    # The binaries differ with the flags they are built with: both name the folder.
    key = hashlib.sha256(f"{_digest(tarball)} {build_flags(source.ldflags())}".encode())
    folder = "-".join(filter(None, ["jumpstarter", key.hexdigest()[:16], source.part]))
    return JumpstarterBuild(binary_dir() / folder, source)


def built(source: Source = RELEASE_SOURCE) -> JumpstarterBuild:
    """The build of the configured tarball; raises with the command to run if it is missing."""
    found = _cached(source)
    if not found.complete:
        raise JumpstarterBuildError(
            f"jumpstarter: {source.what} are not built in {found.directory}; run "
            f"`make jumpstarter` (builds them from {source.tarball()}, minutes with an "
            f"empty Go cache)"
        )
    return found


def _go_build(source: Source, tree: Path, out: Path, log: Path) -> None:
    with log.open("wb") as sink:
        for binary in source.binaries:
            command = ["go", "build", *build_flags(source.ldflags()), "-o", str(out / binary.name)]
            result = subprocess.run(
                [*command, binary.package], cwd=tree / binary.module, stdout=sink, stderr=sink
            )
            if result.returncode != 0:
                tail = log.read_text(errors="replace").splitlines()[-15:]
                raise JumpstarterBuildError(
                    "\n".join([*tail, f"jumpstarter: go build failed (full log: {log})"])
                )


def build(source: Source = RELEASE_SOURCE) -> JumpstarterBuild:
    """Build the configured tarball unless its build is already cached; the build."""
    target = _cached(source)
    if target.complete:
        return target
    if shutil.which("go") is None:
        raise JumpstarterBuildError("jumpstarter: no Go toolchain on PATH; install Go 1.26")
    target.directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.directory.parent, prefix=".jumpstarter-") as tmp:
        work = Path(tmp)
        with tarfile.open(source.tarball()) as archive:
            archive.extractall(work / "src", filter="data")
        tree = work / "src" / source.top
        out = work / "out"
        (out / "crds").mkdir(parents=True)
        _go_build(source, tree, out, binary_dir() / f"jumpstarter-{source.key}-build.log")
        for name in source.crds:
            shutil.copy2(tree / _CRD_DIR / name, out / "crds" / name)
        (out / _STAMP).write_text(f"{source.what}, {source.commit}, from {source.tarball()}\n")
        shutil.rmtree(target.directory, ignore_errors=True)
        out.rename(target.directory)
    return target


def main(argv: list[str] | None = None) -> int:
    keys = (sys.argv[1:] if argv is None else argv) or list(DEFAULT_KEYS)
    unknown = sorted(set(keys) - set(SOURCES))
    if unknown:
        print(f"jumpstarter: unknown {unknown}; known: {', '.join(SOURCES)}", file=sys.stderr)
        return 2
    for key in keys:
        source = SOURCES[key]
        try:
            found = build(source)
        except JumpstarterBuildError as error:
            print(error, file=sys.stderr)
            return 1
        print(f"jumpstarter: {source.what} ready in {found.directory}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
