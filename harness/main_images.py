"""Jumpstarter main's exporter image and QEMU runtime image, built here from main's source.

ExporterSets exist only on Jumpstarter main, so their users run main's images, which its
QEMU provisioner renders in what this project calls the `sidecar` layout. The source is
`../shared/vendor/jumpstarter-main-b1f2bb4-python-rust.tar.gz` (or the tarball
`JUMPSTARTER_MAIN_PYTHON_SOURCE` names), an unmodified `git archive` of main at b1f2bb4:

- `python/`: main's uv workspace. Its 62 packages take their version from git (hatch-vcs,
  and some packages' metadata runs `git rev-parse HEAD`), so the unpacked tree is made a git
  repository of one commit, and every package is given `VERSION` on purpose
  (`SETUPTOOLS_SCM_PRETEND_VERSION`). `uv build --all --wheel` builds them: main's Makefile
  builds sdists too, which the image never installs.
- `rust/jumpstarter-exec`: `cargo build --release --locked`, with main's Containerfile's
  `GIT_VERSION` set to `VERSION` (its build.rs embeds it).
- `python/Containerfile` and `controller/Containerfile.qemu-runtime`: what the two
  Dockerfiles under images/ follow, on the project's Debian base instead of Fedora (each
  Dockerfile lists how it differs; tests/unit/test_main_images.py holds them to main's).

Each image is a docker-archive in the images cache, named as main's e2e manifest
(`e2e/manifests/exporterset-qemu-kind-x86_64.yaml`) names them, built once per set of
inputs (the tarball, the version, the Dockerfile, the base). The unpacked tree, the wheels
and the binary are cached by the tarball's digest and the version under
`.cache/jumpstarter-main/`.

    python -m harness.main_images       # both (`make jumpstarter-images` runs it)
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.deploy_render import REPO
from harness.images import (
    CACHE,
    ImageError,
    base_name,
    build,
    build_lock,
    build_once,
    ensure_base,
    link_into,
    report_builds,
)

__all__ = [
    "COMMIT",
    "EXEC_IN_IMAGE",
    "EXPORTER",
    "MAIN_PYTHON_IMAGES",
    "RUNTIME",
    "VERSION",
    "MainImage",
    "build_main_image",
    "exec_binary",
    "main",
    "main_file",
    "once",
    "source_tarball",
    "uv",
    "wheels",
]

TOP = "jumpstarter-main-b1f2bb4"
COMMIT = "b1f2bb41aac09cda79a2afa4b2f4fe07f3c6b0ea"  # ../shared/vendor/README.md
# The version of main's packages and of jumpstarter-exec: a development release of the patch
# after 0.9.0, the last release before this commit, with the commit as its local part, the
# form hatch-vcs gives a commit after a tag. Main's controller built here says `dev`.
VERSION = f"0.9.1.dev0+g{COMMIT[:7]}"
WORK = REPO / ".cache" / "jumpstarter-main"
# Where main's exporter image holds jumpstarter-exec (python/Containerfile's last COPY; its
# provisioner's init container copies it from there: qemu.go's jmpExecBinaryPath).
EXEC_IN_IMAGE = "/jumpstarter/bin/jumpstarter-exec"


@dataclass(frozen=True)
class MainImage:
    """One of main's two images: its Dockerfile here, the Containerfile of main's it follows,
    and the name main's e2e manifest runs it by."""

    key: str  # names its archive, CACHE/<key>.tar
    context: Path  # images/<key>: the Dockerfile
    containerfile: str  # in the tarball, under TOP
    name: str

    def archive(self, cache: Path = CACHE) -> Path:
        return cache / f"{self.key}.tar"


EXPORTER = MainImage(
    key="jumpstarter-main-exporter",
    context=REPO / "images" / "jumpstarter-main-exporter",
    containerfile="python/Containerfile",
    name="quay.io/jumpstarter-dev/jumpstarter:latest",
)
RUNTIME = MainImage(
    key="jumpstarter-main-qemu-runtime",
    context=REPO / "images" / "jumpstarter-main-qemu-runtime",
    containerfile="controller/Containerfile.qemu-runtime",
    name="quay.io/jumpstarter-dev/virtual/qemu-runtime:latest",
)
MAIN_PYTHON_IMAGES = (EXPORTER, RUNTIME)


def source_tarball() -> Path:
    default = REPO.parent / "shared" / "vendor" / f"{TOP}-python-rust.tar.gz"
    return Path(os.environ.get("JUMPSTARTER_MAIN_PYTHON_SOURCE", default))


def main_file(path: str) -> str:
    """The text of `path` (under the tarball's top folder) in main's Python and Rust tarball."""
    with tarfile.open(_tarball()) as tar:
        try:
            stream = tar.extractfile(f"{TOP}/{path}")
        except KeyError:
            stream = None
        if stream is None:
            raise ImageError(f"{source_tarball()} holds no file {TOP}/{path}")
        return stream.read().decode()


def _tarball() -> Path:
    """The tarball, or an error naming where it should be."""
    tarball = source_tarball()
    if not tarball.is_file():
        raise ImageError(
            f"no {tarball}: Jumpstarter main's Python and Rust source "
            "(../shared/vendor/README.md; or set JUMPSTARTER_MAIN_PYTHON_SOURCE)"
        )
    return tarball


def _key() -> str:
    """The tarball's digest and the version: what the tree, wheels and binary come from."""
    with _tarball().open("rb") as stream:
        digest = hashlib.file_digest(stream, "sha256").hexdigest()
    return hashlib.sha256(f"{digest} {VERSION}".encode()).hexdigest()[:16]


def _run(args: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path) -> None:
    with log.open("ab") as sink:
        sink.write(f"$ {' '.join(args)}\n".encode())
        sink.flush()
        done = subprocess.run(args, cwd=cwd, env=dict(env), stdout=sink, stderr=sink)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise ImageError(f"{tail}\nmain-images: {' '.join(args)} failed (log: {log})")


def once(target: Path, make: Callable[[Path], None]) -> Path:
    """`target` (a folder) as `make(partial)` fills it, unless a finished one is there; one
    process at a time makes it (the workers of `make test` may all ask)."""
    if target.is_dir():
        return target
    with build_lock(WORK):
        if not target.is_dir():  # not made meanwhile by another process
            partial = target.with_name(f".{target.name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            make(partial)
            partial.rename(target)
    return target


def _tree(key: str) -> Path:
    """The unpacked source, a git repository of one commit (hatch-vcs and the packages'
    metadata hooks read git)."""

    def make(folder: Path) -> None:
        with tarfile.open(_tarball()) as tar:
            tar.extractall(folder, filter="data")
        top = folder / TOP
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "vendored",
            "GIT_AUTHOR_EMAIL": "vendored@localhost",
            "GIT_AUTHOR_DATE": "2026-08-21T00:00:00Z",
            "GIT_COMMITTER_NAME": "vendored",
            "GIT_COMMITTER_EMAIL": "vendored@localhost",
            "GIT_COMMITTER_DATE": "2026-08-21T00:00:00Z",
        }
        log = folder / "git.log"
        _run(["git", "init", "-q"], top, env, log)
        _run(["git", "add", "-A"], top, env, log)
        _run(["git", "commit", "-q", "--no-gpg-sign", "-m", f"main at {COMMIT}"], top, env, log)

    return once(WORK / f"src-{key}", make) / TOP


def uv() -> str:
    """The venv's uv, at pyproject.toml's pin (it goes into the exporter image), else PATH's."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.is_file() else shutil.which("uv") or str(beside)
    if not Path(found).is_file():
        raise ImageError("main-images: no uv (the dev extra of pyproject.toml installs it)")
    return found


def wheels() -> Path:
    """Main's 62 packages as wheels, each at VERSION, and the pinned requirements of their
    dependencies (`requirements.txt`)."""
    key = _key()
    tree = _tree(key)

    def make(folder: Path) -> None:
        env = {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": VERSION}
        log = folder / "build.log"
        python = tree / "python"
        _run(
            [uv(), "build", "--all", "--wheel", "--out-dir", str(folder / "wheels")],
            python,
            env,
            log,
        )
        exported = subprocess.run(
            [
                uv(),
                "export",
                "--frozen",
                "--no-dev",
                "--all-packages",
                "--no-emit-workspace",
                "--no-header",
                "--output-file",
                str(folder / "requirements.txt"),
            ],
            cwd=python,
            env=env,
            capture_output=True,
            text=True,
        )
        if exported.returncode != 0:
            raise ImageError(f"{exported.stderr}\nmain-images: uv export failed")

    return once(WORK / f"wheels-{key}", make)


def _cargo() -> str:
    found = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(found).is_file():
        raise ImageError("main-images: no cargo on PATH or in ~/.cargo/bin (rustup installs it)")
    return found


def exec_binary() -> Path:
    """Main's jumpstarter-exec, built with its lock, GIT_VERSION=VERSION."""
    key = _key()
    tree = _tree(key)

    def make(folder: Path) -> None:
        env = {
            **os.environ,
            "GIT_VERSION": VERSION,
            "CARGO_TARGET_DIR": str(WORK / "cargo-target"),
        }
        log = folder / "build.log"
        _run(
            [_cargo(), "build", "--release", "--locked", "-p", "jumpstarter-exec"],
            tree / "rust",
            env,
            log,
        )
        shutil.copy2(
            WORK / "cargo-target" / "release" / "jumpstarter-exec", folder / "jumpstarter-exec"
        )

    return once(WORK / f"exec-{key}", make) / "jumpstarter-exec"


def _exporter_context(folder: Path) -> Path:
    """images/jumpstarter-main-exporter with the wheels, their requirements, the exec
    binary, uv and uvx, and main's LICENSE."""
    context = folder / "context"
    shutil.copytree(EXPORTER.context, context)
    built = wheels()
    for wheel in sorted((built / "wheels").glob("*.whl")):
        link_into(wheel, context / "wheels" / wheel.name)
    shutil.copy2(built / "requirements.txt", context / "requirements.txt")
    link_into(exec_binary(), context / "jumpstarter-exec")
    for tool in ("uv", "uvx"):  # main's image has both in /bin
        shutil.copy2(Path(uv()).with_name(tool), context / tool)
    shutil.copy2(_tree(_key()) / "LICENSE", context / "LICENSE")
    return context


def build_main_image(image: MainImage, *, layer_cache: bool = True, cache: Path = CACHE) -> Path:
    """`image`'s archive, unless one from the same inputs is there (with the layer cache)."""
    # The exporter's image holds the uv that installs it; the runtime's holds none.
    tools = (
        subprocess.run([uv(), "--version"], capture_output=True, text=True).stdout
        if image is EXPORTER
        else ""
    )
    inputs = hashlib.sha256(f"{base_name()} {_key()} {image.name} {tools}".encode())
    for path in sorted(image.context.rglob("*")):
        if path.is_file():
            inputs.update(path.relative_to(image.context).as_posix().encode())
            inputs.update(path.read_bytes())
    archive = image.archive(cache)
    if image is EXPORTER:  # built before the images' build lock is taken: it waits on no one
        wheels(), exec_binary()

    def make() -> None:
        base = ensure_base(cache)
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="context-", dir=cache) as folder:
            context = _exporter_context(Path(folder)) if image is EXPORTER else image.context
            build(
                context,
                archive,
                image.name,
                build_args={"BASE": base, "VERSION": VERSION, "WHEELS": _key()}
                if image is EXPORTER
                else {"BASE": base},
                layer_cache=layer_cache,
                cache=cache,
            )

    return build_once(
        archive, inputs.hexdigest(), image.name, make, layer_cache=layer_cache, cache=cache
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.main_images", description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE, help="the images' cache folder")
    args = parser.parse_args(argv)
    builds = [
        (image.name, functools.partial(build_main_image, image, cache=args.cache))
        for image in MAIN_PYTHON_IMAGES
    ]
    return report_builds("main-images", builds)


if __name__ == "__main__":
    sys.exit(main())
