"""`make release`: one version of this product, built into `dist/VERSION/`.

    python -m harness.release                 # the working tree's version (pyproject.toml)
    python -m harness.release --version 0.1.0 # a cut release, again from its commit

A version named in `releases.toml` is built from the commit recorded there (its tree
taken out with `git archive`, its images built by that tree's own `harness.images`),
the working tree's own too once it is cut; the working tree's version not yet cut is
built from HEAD. What lands in `dist/VERSION/`:

- `images/NAME.oci.tar`: the product, the QEMU exporter and the KubeVirt exporter, each
  an archive that `ctr images import`, `podman load` and `docker load` read
  (`harness.ociarchive`), the product named `...virtualtarget:VERSION`, each exporter by
  the name its classes default to (`IMAGES`), each labelled with the licence, version and
  commit;
- `sbom/NAME.cdx.json`: each image's Python packages (`harness.sbom`);
- `manifests/crds.yaml`: this product's CRDs alone; `manifests/cert-manager.yaml`: the
  cert-manager route rendered; `kustomize/`: the kustomize tree of every route
  (`deploy/overlays`, `deploy/components`), for the routes that need certificates made
  on the cluster's side; every manifest names the product image by digest;
- `images.json` (each image's names, digest and archive), `CHANGELOG.md` (this version's
  section), `LICENSE`, and `SHA256SUMS` over all of it (`sha256sum -c SHA256SUMS`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.deploy_render import REPO, kubectl
from harness.images import CACHE as IMAGES_CACHE
from harness.images import SUITE, base_tarball, ensure_base, kubevirt_source_tarball
from harness.ociarchive import OciImage, write_oci_archive
from harness.sbom import write_sbom

__all__ = [
    "RELEASES",
    "Source",
    "build_release",
    "changelog_section",
    "main",
    "previous_version",
    "share_build_lock",
    "source_of",
    "version_key",
]

RELEASES = REPO / "releases.toml"
DIST = REPO / "dist"
CACHE = REPO / ".cache" / "release"
# Each image a release ships, by the docker-archive `harness.images` writes. The product
# is released as `ghcr.io/jumpstarter-dev/virtualtarget:VERSION`. An exporter keeps the
# name it was built under, the one classes default to (`...-qemu-exporter:0.9.0`, after the
# Jumpstarter release it runs): the reconciler renders that default into every instance
# that names no image, so a name that changed with each release would roll out every such
# pool on an upgrade. One name per archive: podman keeps the digest only then.
IMAGES = (
    ("virtualtarget", "virtualtarget.tar"),
    ("qemu-exporter", "qemu-exporter.tar"),
    ("kubevirt-exporter", "kubevirt-exporter.tar"),
)
PRODUCT_REPOSITORY = "ghcr.io/jumpstarter-dev/virtualtarget"
ALL_IMAGES = tuple(name for name, _ in IMAGES)


class ReleaseError(RuntimeError):
    """A release that cannot be built as asked."""


@dataclass(frozen=True)
class Source:
    """Where a version comes from: a tree of files at a commit."""

    version: str
    commit: str
    tree: Path
    time: dt.datetime  # the commit's: every timestamp of the release
    dirty: bool = False  # HEAD with uncommitted changes: a build for tests, not a release

    @property
    def revision(self) -> str:
        return f"{self.commit}-dirty" if self.dirty else self.commit

    @property
    def images(self) -> Path:
        """Where this tree's `harness.images` leaves its docker-archives."""
        return IMAGES_CACHE if self.tree == REPO else self.tree / ".cache/images"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def tree_version(tree: Path) -> str:
    version: str = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["version"]
    return version


def licence() -> str:
    """The licence, as pyproject.toml declares it (the one source)."""
    found: str = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    return found


def recorded() -> dict[str, str]:
    """Each cut release's version and the commit it was cut from."""
    table = tomllib.loads(RELEASES.read_text()).get("releases", {})
    return {version: entry["commit"] for version, entry in table.items()}


def source_of(version: str | None) -> Source:
    """The tree a version is built from: a recorded release's commit, or HEAD for the
    working tree's own version."""
    head_version = tree_version(REPO)
    commits = recorded()
    version = version or head_version
    if version in commits:
        commit = _git("rev-parse", f"{commits[version]}^{{commit}}")
    elif version == head_version:
        commit = _git("rev-parse", "HEAD")
    else:
        known = ", ".join([*commits, head_version])
        raise ReleaseError(f"no release {version} (releases.toml and HEAD know: {known})")
    when = dt.datetime.fromtimestamp(int(_git("show", "-s", "--format=%ct", commit)), dt.UTC)
    if commit == _git("rev-parse", "HEAD"):
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
        if dirty:
            print(f"release: uncommitted changes: {version} marked {commit[:12]}-dirty, no release")
        return Source(version, commit, REPO, when, dirty)
    tree = CACHE / f"src-{commit[:12]}"
    if not (tree / "pyproject.toml").is_file():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    if tree_version(tree) != version:
        raise ReleaseError(
            f"{commit[:12]}'s pyproject.toml says {tree_version(tree)}, not {version}"
        )
    return Source(version, commit, tree, when)


def build_images(source: Source, *, product_only: bool = False) -> None:
    """The tree's own `harness.images` (`make image`): its docker-archives. An earlier
    commit's tree builds into a cache folder of its own that shares buildah's storage and
    the local base with the working tree's, so its layers come from the same layer cache,
    and starts from the working tree's archives: the tree's own build keeps each whose
    inputs are its own (the stamp beside it) and builds the others again."""
    if source.tree != REPO:
        _share_layer_cache(source.images)
        _offer_archives(source.images)
    # A tree taken out of git has no ../shared beside it: name the vendored source.
    env = {
        **os.environ,
        "PYTHONPATH": str(source.tree),
        "JUMPSTARTER_PR927_SOURCE": str(kubevirt_source_tarball()),
    }
    command = [sys.executable, "-m", "harness.images", *(["--product-only"] * product_only)]
    subprocess.run(command, cwd=source.tree, env=env, check=True)


def _share_layer_cache(cache: Path) -> None:
    shared = IMAGES_CACHE
    # The base debootstrapped once, in the shared cache, where the other tree finds it (in
    # the shared storage, or made there from the tar linked below). Looked for without the
    # build lock, which an image test may hold for minutes: a release whose images are
    # current builds nothing (`make release` in a node test waited 21 s for it in CI at
    # f688cdb).
    if not base_tarball(shared).is_file():
        ensure_base(shared)
    cache.mkdir(parents=True, exist_ok=True)
    for path in [shared / "storage", *shared.glob(f"{SUITE}-python3-*.tar")]:
        link = cache / path.name
        if not link.exists():
            link.symlink_to(path)
    share_build_lock(cache, shared)


def share_build_lock(cache: Path, shared: Path) -> None:
    """`cache`'s build lock made `shared`'s: one storage, one lock. Every buildah command
    locks its cache folder's `.build.lock` (`harness.images.build_lock`, in whichever
    tree's harness runs it); with two locks on the one storage, one build's `rmi` removed
    a layer the other's was using ("image not known": `make previous-release` beside
    `make jumpstarter-controller-images`, CI at c1fd614)."""
    target = shared / ".build.lock"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch()
    link = cache / target.name
    if link.is_symlink() and link.resolve() == target.resolve():
        return
    link.unlink(missing_ok=True)
    link.symlink_to(target)


def _offer_archives(cache: Path) -> None:
    """The working tree's image archives and their inputs stamps, linked into `cache`
    where it has none. A release cut from a recent commit is most often built from the
    same inputs as the working tree's images, and the builds are reproducible: the same
    bytes, without a build (about 110 s for the three). A tree that finds a stamp not its
    own builds that image again, and every tree's build removes an archive before writing
    it (`Buildah.push_archive`), so nothing is written through a link."""
    shared = IMAGES_CACHE
    for _, built in IMAGES:
        archive, stamp = shared / built, shared / f"{built}.inputs"
        target = cache / built
        if archive.is_file() and stamp.is_file() and not target.exists():
            (cache / stamp.name).unlink(missing_ok=True)
            os.link(archive, target)
            os.link(stamp, cache / stamp.name)


def changelog_section(version: str, changelog: Path = REPO / "CHANGELOG.md") -> str:
    """The `## VERSION` section of the changelog, heading included."""
    text = changelog.read_text()
    match = re.search(rf"^## {re.escape(version)}\b.*?(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise ReleaseError(f"CHANGELOG.md has no section `## {version}`")
    return match.group(0).rstrip() + "\n"


def _archive_names(docker_archive: Path) -> list[str]:
    with tarfile.open(docker_archive) as tar:
        reader = tar.extractfile("manifest.json")
        assert reader is not None
        (entry,) = json.load(reader)
        return list(entry.get("RepoTags") or [])


def release_images(
    source: Source, out: Path, names: Sequence[str] = ALL_IMAGES
) -> dict[str, OciImage]:
    labels = {
        "org.opencontainers.image.version": source.version,
        "org.opencontainers.image.revision": source.revision,
        "org.opencontainers.image.created": source.time.isoformat().replace("+00:00", "Z"),
        "org.opencontainers.image.licenses": licence(),
    }
    made = {}
    for name, built in [(n, b) for n, b in IMAGES if n in names]:
        docker_archive = source.images / built
        if not docker_archive.is_file():
            raise ReleaseError(f"no {docker_archive}: the images were not built")
        if name == "virtualtarget":
            own = f"{PRODUCT_REPOSITORY}:{source.version}"
        else:
            (own,) = _archive_names(docker_archive)
        names = [own]
        image = write_oci_archive(docker_archive, out / "images" / f"{name}.oci.tar", names, labels)
        write_sbom(
            docker_archive,
            out / "sbom" / f"{name}.cdx.json",
            image=own,
            version=source.version,
            digest=image.digest,
            timestamp=source.time,
        )
        made[name] = image
    return made


def _pin(tree: Path, product: OciImage) -> None:
    """Every manifest under `tree` names the product image by digest."""
    pattern = re.compile(rf"{re.escape(PRODUCT_REPOSITORY)}:[\w.\-]+(?![\w.\-@])")
    for path in sorted(tree.rglob("*.yaml")):
        text = path.read_text()
        pinned = pattern.sub(product.reference(), text)
        if pinned != text:
            path.write_text(pinned)


def release_manifests(source: Source, out: Path, product: OciImage) -> None:
    manifests = out / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    tree = out / "kustomize"
    for folder in ("deploy", "crds"):
        shutil.copytree(source.tree / folder, tree / folder, dirs_exist_ok=True)
    _pin(tree, product)
    render = [str(kubectl()), "kustomize"]
    crds = subprocess.run([*render, str(tree / "crds")], check=True, capture_output=True, text=True)
    (manifests / "crds.yaml").write_text(crds.stdout)
    overlay = tree / "deploy" / "overlays" / "cert-manager"
    routed = subprocess.run([*render, str(overlay)], check=True, capture_output=True, text=True)
    (manifests / "cert-manager.yaml").write_text(routed.stdout)


def write_sums(out: Path) -> Path:
    lines = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name != "SHA256SUMS"):
        with path.open("rb") as stream:
            digest = hashlib.file_digest(stream, "sha256").hexdigest()
        lines.append(f"{digest}  {path.relative_to(out).as_posix()}\n")
    sums = out / "SHA256SUMS"
    sums.write_text("".join(lines))
    return sums


def inputs(source: Source, names: Sequence[str]) -> str:
    """A digest of what a release is made of: the commit (and the uncommitted change), the
    images' own input stamps (`harness.images.build_once`), and this module's code."""
    digest = hashlib.sha256(f"{source.version} {source.revision} {sorted(names)}".encode())
    if source.dirty:
        digest.update(
            subprocess.run(
                ["git", "-C", str(REPO), "diff", "HEAD"], check=True, capture_output=True
            ).stdout
        )
    for name, built in IMAGES:
        stamp = source.images / f"{built}.inputs"
        if name not in names:
            continue
        digest.update(stamp.read_bytes() if stamp.is_file() else b"-")
    for module in ("release.py", "ociarchive.py", "sbom.py"):
        digest.update((REPO / "harness" / module).read_bytes())
    digest.update(changelog_section(source.version).encode())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(dist: Path) -> Iterator[None]:
    """One build of a release folder at a time (test workers share `dist/`)."""
    dist.mkdir(parents=True, exist_ok=True)
    with (dist / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_release(
    source: Source, dist: Path = DIST, *, build: bool = True, product_only: bool = False
) -> Path:
    """Build `source` into `dist/VERSION/`, unless it was built from the same inputs; with
    `build=False` its images must be built already (`make image`). `product_only`: the
    product's image and the manifests alone, no release (what an upgrade test installs)."""
    names = ALL_IMAGES[:1] if product_only else ALL_IMAGES
    with _locked(dist):
        if build:
            build_images(source, product_only=product_only)
        out = dist / source.version
        stamp = dist / f".{source.version}.inputs"
        made_of = inputs(source, names)
        if (out / "SHA256SUMS").is_file() and stamp.is_file() and stamp.read_text() == made_of:
            print(f"release: {out} is current")
            return out
        stamp.unlink(missing_ok=True)
        _build(source, out, names)
        stamp.write_text(made_of)
        return out


def _build(source: Source, out: Path, names: Sequence[str]) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    images = release_images(source, out, names)
    release_manifests(source, out, images["virtualtarget"])
    (out / "CHANGELOG.md").write_text(changelog_section(source.version))
    shutil.copyfile(REPO / "LICENSE", out / "LICENSE")
    listing = {
        name: {
            "names": list(image.names),
            "digest": image.digest,
            "archive": image.archive.relative_to(out).as_posix(),
        }
        for name, image in images.items()
    }
    document = {"version": source.version, "commit": source.revision, "images": listing}
    (out / "images.json").write_text(json.dumps(document, indent=2) + "\n")
    write_sums(out)


def version_key(version: str) -> tuple[int, ...]:
    """A version's numbers, to order versions by."""
    return tuple(int(part) for part in version.split("."))


def previous_version() -> str:
    """The newest cut release before the working tree's version: what it upgrades from."""
    head = version_key(tree_version(REPO))
    earlier = [v for v in recorded() if version_key(v) < head]
    if not earlier:
        raise ReleaseError(f"releases.toml records no release before {tree_version(REPO)}")
    return max(earlier, key=version_key)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.release", description=__doc__)
    parser.add_argument("--version", help="the version (default: pyproject.toml's)")
    parser.add_argument("--dist", type=Path, default=DIST, help="where VERSION/ is written")
    parser.add_argument(
        "--previous", action="store_true", help="the newest cut release before this version"
    )
    parser.add_argument(
        "--product-only",
        action="store_true",
        help="only the product's image and the manifests (no release: for an upgrade test)",
    )
    args = parser.parse_args(argv)
    try:
        version = previous_version() if args.previous else args.version
        out = build_release(source_of(version), args.dist, product_only=args.product_only)
    except (ReleaseError, subprocess.CalledProcessError) as error:
        print(f"release: {error}", file=sys.stderr)
        return 1
    print(f"release: {out} (check with: cd {out} && sha256sum -c SHA256SUMS)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
