"""Jumpstarter's released controller and router, built from the release's source.

The tests and `make run` run Jumpstarter 0.9.0's own controller manager and router. Their Go
module is not on the module proxy, but every dependency is, so they build here from the
source tarball of the release (`../shared/vendor/jumpstarter-0.9.0-controller.tar.gz`, or
the tarball `JUMPSTARTER_SOURCE` names): about 5.5 CPU-minutes with an empty Go cache.

The build is cached beside the control plane's binaries under a key made from the
tarball's digest, `.bin/jumpstarter-<digest>/`: `controller`, `router` and the release's
`jumpstarter.dev` CRDs (`crds/`, from its operator's `config/crd/bases`). A folder is
complete once its `BUILT` stamp exists, so an interrupted build is done again.

    python -m harness.jumpstarter_build      # what `make jumpstarter` runs
"""

from __future__ import annotations

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

__all__ = [
    "RELEASE",
    "JumpstarterBuild",
    "JumpstarterBuildError",
    "build",
    "built",
    "source_tarball",
]

RELEASE = "v0.9.0"
RELEASE_COMMIT = "a084412198a554514ecba40be0bd6d4e53c2d9e7"  # the tag, ../shared/vendor/README.md
TOP = "jumpstarter-0.9.0"  # the tarball's top folder
CRD_DIR = "controller/deploy/operator/config/crd/bases"
# The kinds Jumpstarter's controller serves (the operator's own CRD is not needed).
CRDS = (
    "jumpstarter.dev_clients.yaml",
    "jumpstarter.dev_exporteraccesspolicies.yaml",
    "jumpstarter.dev_exporters.yaml",
    "jumpstarter.dev_leases.yaml",
)
_STAMP = "BUILT"


class JumpstarterBuildError(RuntimeError):
    """The build cannot run or failed; the message says why and what to run."""


def source_tarball() -> Path:
    default = REPO_ROOT.parent / "shared" / "vendor" / f"{TOP}-controller.tar.gz"
    return Path(os.environ.get("JUMPSTARTER_SOURCE", default))


@dataclass(frozen=True)
class JumpstarterBuild:
    """Where one built release lives."""

    directory: Path

    @property
    def controller(self) -> Path:
        return self.directory / "controller"

    @property
    def router(self) -> Path:
        return self.directory / "router"

    @property
    def crds(self) -> list[Path]:
        return [self.directory / "crds" / name for name in CRDS]

    @property
    def complete(self) -> bool:
        return (self.directory / _STAMP).exists()


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()[:16]


def _cached(tarball: Path) -> JumpstarterBuild:
    if not tarball.is_file():
        raise JumpstarterBuildError(
            f"jumpstarter: no release source at {tarball}; set JUMPSTARTER_SOURCE to "
            f"Jumpstarter's {RELEASE} source tarball "
            f"(`git archive {RELEASE} controller LICENSE e2e`)"
        )
    return JumpstarterBuild(binary_dir() / f"jumpstarter-{_digest(tarball)}")


def built() -> JumpstarterBuild:
    """The build of the configured source; raises with the command to run if it is missing."""
    found = _cached(source_tarball())
    if not found.complete:
        raise JumpstarterBuildError(
            f"jumpstarter: Jumpstarter's {RELEASE} controller and router are not built in "
            f"{found.directory}; run `make jumpstarter` (builds them from "
            f"{source_tarball()}, minutes with an empty Go cache)"
        )
    return found


def _go_build(source: Path, out: Path, log: Path) -> None:
    flags = f"-X main.version={RELEASE} -X main.gitCommit={RELEASE_COMMIT}"
    command = ["go", "build", "-ldflags", flags, "-o", f"{out}/", "./cmd/", "./cmd/router"]
    with log.open("wb") as sink:
        result = subprocess.run(command, cwd=source / "controller", stdout=sink, stderr=sink)
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise JumpstarterBuildError(
            "\n".join([*tail, f"jumpstarter: go build failed (full log: {log})"])
        )
    (out / "cmd").rename(out / "controller")


def build() -> JumpstarterBuild:
    """Build the configured source unless its build is already cached; the build."""
    tarball = source_tarball()
    target = _cached(tarball)
    if target.complete:
        return target
    if shutil.which("go") is None:
        raise JumpstarterBuildError("jumpstarter: no Go toolchain on PATH; install Go 1.26")
    target.directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.directory.parent, prefix=".jumpstarter-") as tmp:
        work = Path(tmp)
        with tarfile.open(tarball) as archive:
            archive.extractall(work / "src", filter="data")
        source = work / "src" / TOP
        out = work / "out"
        (out / "crds").mkdir(parents=True)
        _go_build(source, out, binary_dir() / "jumpstarter-build.log")
        for name in CRDS:
            shutil.copy2(source / CRD_DIR / name, out / "crds" / name)
        (out / _STAMP).write_text(f"{RELEASE} {RELEASE_COMMIT} from {tarball}\n")
        shutil.rmtree(target.directory, ignore_errors=True)
        out.rename(target.directory)
    return target


def main() -> int:
    try:
        found = build()
    except JumpstarterBuildError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"jumpstarter: Jumpstarter's {RELEASE} controller and router ready in {found.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
