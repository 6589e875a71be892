"""Container images built here from a Dockerfile, without a registry or a daemon.

No registry is reachable from this kind of machine, so the public base
(`python:3.11-slim-bookworm`) cannot be pulled. Instead a local base is made once by
debootstrap (Debian bookworm minbase with python3, python3-venv, pip and
ca-certificates: about 130 s) into a git-ignored cache folder, and the Dockerfile is
built on it with buildah (`buildah bud --isolation chroot --network host`: daemonless,
so nothing is left running). Every image comes out as a docker-archive, the format
`ctr -n k8s.io images import` keeps the full name of (an oci-archive import keeps a short
name the CRI does not match).

pip inside a build reaches the package index with this machine's pip settings, handed in
as build secrets (`pip-conf`, a pip configuration file, and `pip-ca`, a CA bundle):
mounted for the one RUN that installs, they never become part of a layer.

For tests, `unpacked()` unpacks an archive (skopeo, umoci) and runs commands in it with
runc as the kubelet would: the image's user, a read-only root filesystem, no network.

    python -m harness.images                # all three images (`make image`)
    python -m harness.images --product-only # the product image
    python -m harness.images --base-only    # only the local base

The QEMU exporter image (`images/qemu-exporter`, `build_qemu_exporter`) is the exporter
image of QEMU pools: Jumpstarter's `jmp run` and QEMU driver with Debian's QEMU. The
KubeVirt exporter image (`images/kubevirt-exporter`, `build_kubevirt_exporter`) is that of
KubeVirt pools: `jmp run` and the KubeVirt driver of Jumpstarter's pull request #927, built
from its vendored source tarball (`kubevirt_source_tarball`).

Everything lives under one cache folder (`.cache/images/`, `--cache`); a finished
buildah command leaves nothing mounted or running, and a failed or timed-out one (or a
failed debootstrap) has its mounts under the cache folder removed.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import yaml

from api.jumpstarter import JUMPSTARTER_RELEASE
from api.provisioners.kubevirt import KUBEVIRT_EXPORTER_IMAGE
from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.deploy_render import DEPLOY, REPO
from harness.nodehost import unmount_under

__all__ = [
    "BASE_PACKAGES",
    "CACHE",
    "KUBEVIRT_DRIVER_COMMIT",
    "KUBEVIRT_DRIVER_VERSION",
    "KUBEVIRT_EXPORTER_CONTEXT",
    "QEMU_EXPORTER_CONTEXT",
    "Buildah",
    "ImageError",
    "Unpacked",
    "archive_config",
    "base_name",
    "base_tarball",
    "build",
    "build_kubevirt_exporter",
    "build_once",
    "build_product",
    "build_qemu_exporter",
    "ensure_base",
    "kubevirt_source_tarball",
    "link_into",
    "main",
    "pack_root",
    "pip_secrets",
    "product_image",
    "report_builds",
    "unpacked",
]

CACHE = REPO / ".cache" / "images"
QEMU_EXPORTER_CONTEXT = REPO / "images" / "qemu-exporter"
KUBEVIRT_EXPORTER_CONTEXT = REPO / "images" / "kubevirt-exporter"
# The vendored source of pull request #927 (../shared/vendor/README.md): its top folder, the
# commit it was archived at, the driver's folder in it, and the version its wheel is given
# (the release it builds against, with a local label naming the pull request and commit:
# images/kubevirt-exporter/Dockerfile).
KUBEVIRT_SOURCE_TOP = "jumpstarter-pr927-cd305c7"
KUBEVIRT_DRIVER_COMMIT = "cd305c75103cf6e0040e4537cdde91a73092da88"
KUBEVIRT_DRIVER_DIR = "python/packages/jumpstarter-driver-kubevirt"
KUBEVIRT_DRIVER_VERSION = f"{JUMPSTARTER_RELEASE}+pr927.g{KUBEVIRT_DRIVER_COMMIT[:7]}"
SUITE = "bookworm"
# What the Dockerfile's build stage needs of a base: python3 with venv and pip, and the
# CA certificates pip checks the index with.
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")
BASE_REPOSITORY = "localhost/virtualtarget-base"
# The build secrets' ids (the Dockerfile mounts them at /run/secrets/ID; see pip_secrets).
PIP_CONF_SECRET, PIP_CA_SECRET = "pip-conf", "pip-ca"
# pip settings that mean the same inside a build; host paths (find-links, ...) do not.
PORTABLE_PIP_SETTINGS = ("index-url", "extra-index-url", "trusted-host", "timeout", "retries")


class ImageError(RuntimeError):
    """Something the person can act on: the message says what failed and what to run."""


def product_image() -> str:
    """The image name the Deployments run (deploy/base, the one source)."""
    deployment = yaml.safe_load((DEPLOY / "base" / "webhook-deployment.yaml").read_text())
    image: str = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def _run(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise ImageError(f"{' '.join(args[:3])} failed (exit {result.returncode}):\n{tail}")
    return result


def _require(*tools: str) -> None:
    # Each tool comes in the Debian package of its name.
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise ImageError(f"missing {', '.join(missing)}: apt-get install -y {' '.join(missing)}")


# --- the local base -------------------------------------------------------------------


def apt_mirror(suite: str = SUITE, sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses for `suite` (deb822 or one-line sources)."""
    for path in sorted((sources / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if re.match(r"^\w[\w-]*:", line)
            )
            suites = fields.get("Suites", "").split()
            if "deb" in fields.get("Types", "").split() and suite in suites:
                return fields["URIs"].split()[0]
    for path in [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list"))]:
        if path.is_file():
            for line in path.read_text().splitlines():
                words = [w for w in line.split() if not w.startswith("[")]
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    raise ImageError(f"no apt source for {suite} under {sources}: debootstrap needs a mirror")


def _base_key() -> str:
    return hashlib.sha256(f"{SUITE} {' '.join(BASE_PACKAGES)}".encode()).hexdigest()[:12]


def base_tarball(cache: Path = CACHE) -> Path:
    """Where `cache` keeps the tar of the debootstrapped base (`base_rootfs` makes it)."""
    return cache / f"{SUITE}-python3-{_base_key()}.tar"


def base_rootfs(cache: Path = CACHE) -> Path:
    """The tar of the debootstrapped base, made once (about 130 s)."""
    target = base_tarball(cache)
    if target.is_file():
        return target
    _require("debootstrap")
    cache.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=cache))
    started = time.monotonic()
    try:
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                SUITE,
                str(root),
                apt_mirror(),
            ],
            timeout=1200,
        )
        unmount_under(root)
        pack_root(root, target)
    finally:
        unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)
    print(f"images: debootstrap base {target.name} in {time.monotonic() - started:.0f} s")
    return target


# --- buildah --------------------------------------------------------------------------


@dataclass(frozen=True)
class Buildah:
    """buildah with its storage under `cache`: nothing outside it is touched."""

    cache: Path = CACHE

    def __call__(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        _require("buildah")
        storage = self.cache / "storage"
        command = [
            "buildah",
            "--root",
            str(storage / "root"),
            "--runroot",
            str(storage / "run"),
            "--storage-driver",
            "overlay",
            *args,
        ]
        try:
            with build_lock(self.cache):
                return _run(command, timeout=timeout)
        except (ImageError, subprocess.TimeoutExpired):
            # A build cut short can leave its containers' layers mounted under the
            # storage root (a finished command leaves none).
            unmount_under(storage)
            raise

    def exists(self, image: str) -> bool:
        images = json.loads(self("images", "--json").stdout or "[]")
        return any(image in (entry.get("names") or []) for entry in images)

    def push_archive(self, image: str, archive: Path, name: str) -> Path:
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.unlink(missing_ok=True)
        self("push", "--quiet", image, f"docker-archive:{archive}:{name}")
        return archive


_HELD: dict[Path, int] = {}  # cache folder -> this process's depth of `build_lock`


@contextlib.contextmanager
def build_lock(cache: Path) -> Iterator[None]:
    """One build at a time per cache folder, across processes (the parallel workers of
    `make test`, `make image` beside them): a file lock, reentrant within a process. Every
    buildah command holds it, so whoever holds it sees the cache with nothing mounted."""
    if _HELD.get(cache):
        _HELD[cache] += 1
        try:
            yield
        finally:
            _HELD[cache] -= 1
        return
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _HELD[cache] = 1
        try:
            yield
        finally:
            _HELD[cache] = 0
            fcntl.flock(lock, fcntl.LOCK_UN)


def pack_root(root: Path, target: Path) -> None:
    """A debootstrapped root filesystem as a tarball at `target` (numeric owners), whole
    or not at all, without what apt downloaded (no part of a root filesystem)."""
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (root / leftover).glob("*"):
            if item.is_file():
                item.unlink()
    partial = target.with_suffix(".partial")
    _run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."])
    partial.rename(target)


def base_name() -> str:
    """The local base's name: what it holds, so an image's inputs can name it without
    buildah (`build_once` looks without the build lock)."""
    return f"{BASE_REPOSITORY}:{SUITE}-{_base_key()}"


def ensure_base(cache: Path = CACHE) -> str:
    """The local base in buildah's storage, named by what it holds."""
    with build_lock(cache):
        return _ensure_base(cache)


def _ensure_base(cache: Path) -> str:
    buildah = Buildah(cache)
    name = base_name()
    if buildah.exists(name):
        return name
    rootfs = base_rootfs(cache)
    container = buildah("from", "--quiet", "scratch").stdout.strip()
    try:
        buildah("add", "--quiet", container, str(rootfs), "/")
        buildah("config", "--cmd", "python3", "--env", "LANG=C.UTF-8", container)
        buildah("commit", "--quiet", "--rm", container, name)
    except ImageError:
        with contextlib.suppress(ImageError):
            buildah("rm", container)
        raise
    return name


def pip_secrets(
    folder: Path, environ: Mapping[str, str] | None = None, python: str = sys.executable
) -> dict[str, Path]:
    """This machine's pip index settings and CA, written into `folder` as the build
    secrets the Dockerfile mounts (`pip-conf`, `pip-ca`); only settings that mean the
    same inside a build are kept."""
    environ = os.environ if environ is None else environ
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, env=dict(environ)
    ).stdout
    settings: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")
    for variable, value in environ.items():
        if variable.startswith("PIP_"):
            settings[variable[4:].lower().replace("_", "-")] = value
    if "default-timeout" in settings:
        settings.setdefault("timeout", settings["default-timeout"])
    secrets: dict[str, Path] = {}
    conf = configparser.ConfigParser()
    conf["global"] = {k: settings[k] for k in PORTABLE_PIP_SETTINGS if k in settings}
    if conf["global"]:
        path = folder / PIP_CONF_SECRET
        with path.open("w") as out:
            conf.write(out)
        secrets[PIP_CONF_SECRET] = path
    ca = settings.get("cert")
    if ca and Path(ca).is_file():
        secrets[PIP_CA_SECRET] = Path(ca)
    return secrets


def build(
    context: Path,
    archive: Path,
    name: str,
    *,
    dockerfile: Path | None = None,
    build_args: Mapping[str, str] | None = None,
    layer_cache: bool = True,
    cache: Path = CACHE,
) -> Path:
    """Build `context`'s Dockerfile with buildah and write it to `archive` as `name`."""
    buildah = Buildah(cache)
    started = time.monotonic()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as folder:  # mode 0700
        secrets = pip_secrets(Path(folder))
        iid = Path(folder) / "image-id"
        args = ["bud", "--quiet", "--isolation", "chroot", "--network", "host", "--pull=never"]
        args += ["--force-rm"]  # intermediate containers go, also when a step fails
        args += ["--layers"] if layer_cache else ["--no-cache"]
        for key, value in (build_args or {}).items():
            args += ["--build-arg", f"{key}={value}"]
        for secret, path in secrets.items():
            args += ["--secret", f"id={secret},src={path}"]
        dockerfile = dockerfile or context / "Dockerfile"
        buildah(*args, "--iidfile", str(iid), "-f", str(dockerfile), str(context))
        image = iid.read_text().strip()
    try:
        # Pushed by ID, untagged: the archive carries `name` and no other.
        buildah.push_archive(image, archive, name)
    finally:
        with contextlib.suppress(ImageError):  # still a layer another build uses
            buildah("rmi", image)
    print(f"images: built {name} into {archive} in {time.monotonic() - started:.0f} s")
    return archive


def build_product(
    archive: Path | None = None, *, layer_cache: bool = True, cache: Path = CACHE
) -> Path:
    """The product image from the repository's Dockerfile, on the local base."""
    base = base_name()
    archive = archive or cache / "virtualtarget.tar"
    inputs = hashlib.sha256(f"{base} {product_image()}".encode())
    for path in [REPO / "Dockerfile", *product_context()]:
        inputs.update(path.relative_to(REPO).as_posix().encode())
        inputs.update(path.read_bytes())
    return build_once(
        archive,
        inputs.hexdigest(),
        product_image(),
        lambda: build(
            REPO,
            archive,
            product_image(),
            build_args={"BASE": ensure_base(cache)},
            layer_cache=layer_cache,
            cache=cache,
        ),
        layer_cache=layer_cache,
        cache=cache,
    )


def product_context() -> list[Path]:
    """The files of the product's build context, as `.dockerignore` lets them in: the
    entries it names with `!`, less what its `**/` patterns leave out."""
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    kept = [line[1:].rstrip("/") for line in lines if line.startswith("!")]
    dropped = [line[3:] for line in lines if line.startswith("**/")]
    files: list[Path] = []
    for entry in kept:
        path = REPO / entry
        for found in sorted(path.rglob("*")) if path.is_dir() else [path]:
            parts = found.relative_to(REPO).parts
            if found.is_file() and not any(fnmatch(part, d) for part in parts for d in dropped):
                files.append(found)
    return files


def build_qemu_exporter(
    archive: Path | None = None, *, layer_cache: bool = True, cache: Path = CACHE
) -> Path:
    """The QEMU exporter image (`images/qemu-exporter`), on the local base. With the layer
    cache, an archive built from the same inputs (the context's files, the base, the
    release) is kept as it is: `make image` and the node tier both ask for it, and
    writing its 900 MB again would take most of a rebuild's time."""
    base = base_name()
    archive = archive or cache / "qemu-exporter.tar"
    inputs = hashlib.sha256(f"{base} {JUMPSTARTER_RELEASE}".encode())
    for path in sorted(QEMU_EXPORTER_CONTEXT.rglob("*")):
        if path.is_file():
            inputs.update(path.relative_to(QEMU_EXPORTER_CONTEXT).as_posix().encode())
            inputs.update(path.read_bytes())
    return build_once(
        archive,
        inputs.hexdigest(),
        QEMU_EXPORTER_IMAGE,
        lambda: build(
            QEMU_EXPORTER_CONTEXT,
            archive,
            QEMU_EXPORTER_IMAGE,
            build_args={"BASE": ensure_base(cache), "RELEASE": JUMPSTARTER_RELEASE},
            layer_cache=layer_cache,
            cache=cache,
        ),
        layer_cache=layer_cache,
        cache=cache,
    )


def kubevirt_source_tarball() -> Path:
    """Pull request #927's source tarball: `../shared/vendor/jumpstarter-pr927-kubevirt.tar.gz`
    beside the repository, or the one `JUMPSTARTER_PR927_SOURCE` names."""
    default = REPO.parent / "shared" / "vendor" / "jumpstarter-pr927-kubevirt.tar.gz"
    return Path(os.environ.get("JUMPSTARTER_PR927_SOURCE", default))


def _kubevirt_context(folder: Path, tarball: Path) -> Path:
    """The build context in `folder`: images/kubevirt-exporter's files, the driver's folder
    as `driver/` and the repository's LICENSE as `driver-LICENSE`, both as the tarball
    holds them."""
    context = folder / "context"
    shutil.copytree(KUBEVIRT_EXPORTER_CONTEXT, context)
    prefix = f"{KUBEVIRT_SOURCE_TOP}/{KUBEVIRT_DRIVER_DIR}/"
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(prefix):
                target = context / "driver" / member.name.removeprefix(prefix)
            elif member.isfile() and member.name == f"{KUBEVIRT_SOURCE_TOP}/LICENSE":
                target = context / "driver-LICENSE"
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_member(tar, member.name).read())
    if not (context / "driver" / "pyproject.toml").is_file():
        raise ImageError(f"{tarball} has no {prefix}pyproject.toml")
    return context


def build_kubevirt_exporter(
    archive: Path | None = None, *, layer_cache: bool = True, cache: Path = CACHE
) -> Path:
    """The KubeVirt exporter image (`images/kubevirt-exporter`), on the local base, with
    the driver from pull request #927's tarball (`kubevirt_source_tarball`). Kept as it is
    when built from the same inputs (the context's files, the tarball, the base, the
    release, the driver's version) with the layer cache on."""
    tarball = kubevirt_source_tarball()
    if not tarball.is_file():
        raise ImageError(
            f"no {tarball}: the source of Jumpstarter's pull request #927 "
            "(../shared/vendor/README.md; or set JUMPSTARTER_PR927_SOURCE)"
        )
    base = base_name()
    archive = archive or cache / "kubevirt-exporter.tar"
    version_args = {
        "DRIVER_VERSION": KUBEVIRT_DRIVER_VERSION,
        "DRIVER_COMMIT": KUBEVIRT_DRIVER_COMMIT,
    }
    inputs = hashlib.sha256(f"{base} {JUMPSTARTER_RELEASE} {sorted(version_args.items())}".encode())
    inputs.update(hashlib.sha256(tarball.read_bytes()).digest())
    for path in sorted(KUBEVIRT_EXPORTER_CONTEXT.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            inputs.update(path.relative_to(KUBEVIRT_EXPORTER_CONTEXT).as_posix().encode())
            inputs.update(path.read_bytes())

    def make() -> Path:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="context-", dir=cache) as folder:
            return build(
                _kubevirt_context(Path(folder), tarball),
                archive,
                KUBEVIRT_EXPORTER_IMAGE,
                build_args={
                    "BASE": ensure_base(cache),
                    "RELEASE": JUMPSTARTER_RELEASE,
                    **version_args,
                },
                layer_cache=layer_cache,
                cache=cache,
            )

    return build_once(
        archive,
        inputs.hexdigest(),
        KUBEVIRT_EXPORTER_IMAGE,
        make,
        layer_cache=layer_cache,
        cache=cache,
    )


def build_once(
    archive: Path,
    inputs: str,
    what: str,
    make: Callable[[], object],
    *,
    layer_cache: bool,
    cache: Path,
) -> Path:
    """`archive` as `make()` writes it under the build lock, unless it was made from the
    same `inputs` (a digest of them, kept beside it) and the layer cache is on. A current
    archive is found without the lock: a node test that asks for one must not wait out an
    image test's build (the stamp is written after the archive, and removed before it is
    made again)."""
    stamp = archive.with_name(archive.name + ".inputs")

    def current() -> bool:
        return layer_cache and archive.is_file() and stamp.is_file() and stamp.read_text() == inputs

    if not current():
        with build_lock(cache):
            if not current():  # not made meanwhile by another process
                stamp.unlink(missing_ok=True)
                make()
                stamp.write_text(inputs)
                return archive
    print(f"images: {what} in {archive} is current")
    return archive


def link_into(source: Path, target: Path) -> None:
    """`source` at `target` in a build context: a hard link where it can be (an archive's
    hundreds of MB are not copied), else a copy (another file system)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def report_builds(prefix: str, builds: Sequence[tuple[str, Callable[[], Path]]]) -> int:
    """Make each archive in turn, printing its size, its time and the CPU its build's
    processes used; at the first failure print it and return 1."""
    for what, make in builds:
        started, cpu = time.monotonic(), _children_cpu_seconds()
        try:
            archive = make()
        except ImageError as error:
            print(f"{prefix}: {error}", file=sys.stderr)
            return 1
        print(
            f"{prefix}: {what}: {archive} {archive.stat().st_size / 1e6:.0f} MB, "
            f"{time.monotonic() - started:.0f} s "
            f"({_children_cpu_seconds() - cpu:.0f} CPU-s in builds)",
            flush=True,
        )
    return 0


def _children_cpu_seconds() -> float:
    """CPU time of this process's finished children (go, buildah, pip) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- running an image -----------------------------------------------------------------


def archive_config(archive: Path) -> dict[str, Any]:
    """The image configuration (User, Entrypoint, Env, history, ...) in a docker-archive."""
    with tarfile.open(archive) as tar:
        (manifest,) = json.load(_member(tar, "manifest.json"))
        config: dict[str, Any] = json.load(_member(tar, manifest["Config"]))
    return config


def _member(tar: tarfile.TarFile, name: str) -> Any:
    member = tar.extractfile(name)
    if member is None:
        raise ImageError(f"{name} is not a file in the archive")
    return member


def _user(spec: str, rootfs: Path) -> tuple[int, int]:
    """The image's `User` as numbers (a name is looked up in the image's /etc/passwd)."""
    user, _, group = (spec or "0").partition(":")
    if not user.isdigit():
        for line in (rootfs / "etc" / "passwd").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == user:
                user, group = fields[2], group or fields[3]
                break
        else:
            raise ImageError(f"user {user!r} is not in the image's /etc/passwd")
    return int(user), int(group) if group.isdigit() else int(user)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _extract_layers(archive: Path, rootfs: Path) -> None:
    """The image's layers applied in order, each one's whiteouts (`.wh.NAME`,
    `.wh..wh..opq`) removing from the layers below before it is unpacked."""
    with tarfile.open(archive) as tar:
        (manifest,) = json.load(_member(tar, "manifest.json"))
        for layer in manifest["Layers"]:
            with tarfile.open(fileobj=_member(tar, layer)) as members:
                names = members.getnames()
            for name in names:
                folder, _, base = name.rpartition("/")
                if base == ".wh..wh..opq":
                    for item in (rootfs / folder).glob("*"):
                        _remove(item)
                elif base.startswith(".wh."):
                    _remove(rootfs / folder / base[4:])
            outer = subprocess.Popen(["tar", "-xOf", str(archive), layer], stdout=subprocess.PIPE)
            _run(
                ["tar", "-x", "--numeric-owner", "-p", "--exclude=.wh.*", "-C", str(rootfs)],
                stdin=outer.stdout,
            )
            if outer.wait() != 0:
                raise ImageError(f"cannot read {layer} from {archive}")


@dataclass(frozen=True)
class Unpacked:
    """An image's root filesystem; each `run` is one runc container on it."""

    rootfs: Path
    config: dict[str, Any]

    def run(
        self,
        args: Sequence[str],
        *,
        entrypoint: Sequence[str] | None = None,
        mounts: Mapping[str, Path] | None = None,
        user: tuple[int, int] | None = None,
        read_only: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """`docker run --read-only IMAGE args` as the Deployments run it: the image's
        user, environment and working folder, no capabilities, no privilege escalation,
        no network (a fresh network namespace with only `lo`), bind `mounts` (container
        path -> host folder, writable), and /tmp an empty writable folder; `user`
        (uid, gid) as `docker run --user` gives it."""
        image = self.config.get("config", {})
        uid, gid = user or _user(image.get("User", ""), self.rootfs)
        with tempfile.TemporaryDirectory(prefix="container-", dir=self.rootfs.parent) as work:
            bundle = Path(work)
            _run(["runc", "spec", "--bundle", str(bundle)])
            spec = json.loads((bundle / "config.json").read_text())
            tmp = bundle / "tmp"
            tmp.mkdir(mode=0o1777)
            os.chmod(tmp, 0o1777)
            chosen = image.get("Entrypoint") or [] if entrypoint is None else entrypoint
            spec["process"].update(
                args=[*chosen, *args],
                terminal=False,
                user={"uid": uid, "gid": gid},
                env=image.get("Env") or [],
                cwd=image.get("WorkingDir") or "/",
                capabilities={},
                noNewPrivileges=True,
            )
            spec["root"] = {"path": str(self.rootfs), "readonly": read_only}
            spec["mounts"] += [
                {
                    "destination": target,
                    "type": "bind",
                    "source": str(source),
                    "options": ["rbind", "rw"],
                }
                for target, source in {"/tmp": tmp, **(mounts or {})}.items()
            ]
            (bundle / "config.json").write_text(json.dumps(spec))
            name = f"vt-{uuid.uuid4().hex[:12]}"
            try:
                return subprocess.run(
                    ["runc", "run", "--bundle", str(bundle), name],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    stdin=subprocess.DEVNULL,
                )
            finally:
                subprocess.run(["runc", "delete", "--force", name], capture_output=True)


@contextlib.contextmanager
def unpacked(archive: Path, work: Path) -> Iterator[Unpacked]:
    """`archive`'s root filesystem under `work` (removed afterwards, mounts included)."""
    _require("runc")
    rootfs = work / "rootfs"
    rootfs.mkdir(parents=True)
    try:
        _extract_layers(archive, rootfs)
        yield Unpacked(rootfs, archive_config(archive))
    finally:
        unmount_under(work)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.images", description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE, help="the cache folder")
    parser.add_argument(
        "--out", type=Path, help="the product image's archive (default: CACHE/virtualtarget.tar)"
    )
    parser.add_argument("--base-only", action="store_true", help="only make the local base")
    parser.add_argument(
        "--product-only", action="store_true", help="not the QEMU and KubeVirt exporter images"
    )
    args = parser.parse_args(argv)
    try:
        if args.base_only:
            print(ensure_base(args.cache))
            return 0
        archives = [build_product(args.out, cache=args.cache)]
        if not args.product_only:
            archives.append(build_qemu_exporter(cache=args.cache))
            archives.append(build_kubevirt_exporter(cache=args.cache))
    except ImageError as error:
        print(f"images: {error}", file=sys.stderr)
        return 1
    imports = "".join(f"\n  ctr -n k8s.io images import {a}" for a in archives)
    print(f"images: import into a node's containerd with{imports}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
