"""KubeVirt v1.7.0, built here from its Go module, and its images, without a registry.

What a KubeVirt user installs is `kubevirt-operator.yaml` (virt-operator) and
`kubevirt-cr.yaml` (a `KubeVirt` CR); virt-operator then deploys virt-api,
virt-controller and virt-handler, and virt-controller runs each VM in a virt-launcher Pod,
each from an image named `{registry}/{component}:{tag}`. Here:

- the source is the `kubevirt.io/kubevirt@v1.7.0` module from the module proxy, copied out
  of the module cache with its staging `replace`s of kubevirt.io/api and client-go dropped
  (those nested modules are not in the zip; v1.7.0 of both is on the proxy) and its
  `go.work` removed;
- every binary the five images hold is one `go build` (virt-launcher links libvirt through
  cgo: Debian's `libvirt-dev`), stamped with the version as KubeVirt's release build does;
  `container-disk` (the containerDisk's tiny server) is `gcc -static`;
- the manifests are KubeVirt's own `manifests/release/*.yaml.in`, rendered by its
  `tools/manifest-templator` with the registry and tag the images are named by;
- the images share one root filesystem: a debootstrap of Debian 13 (trixie), whose libvirt
  (11.x, with the modular `virtqemud` the launcher starts) and QEMU (10.x) are of the
  generation KubeVirt 1.7's own launcher ships (Debian 12's libvirt 9.0 has no virtqemud),
  plus one layer of KubeVirt's binaries and its launcher configuration (qemu.conf,
  virtqemud.conf, nsswitch.conf, the qemu user 107). Each component is an image of its own
  name, user and entrypoint as upstream's BUILD files give them, over the same two layers,
  in one docker-archive.

Each step is cached under `.cache/kubevirt/` by a key of its inputs, so a second run only
checks stamps. Build times are written to `.cache/kubevirt/timings.json`.

    python -m harness.kubevirt_build      # what `make kubevirt` runs
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.controlplane import REPO_ROOT
from harness.gobuild import build_flags, goflags
from harness.guest import build_marker_guest
from harness.images import apt_mirror, pack_root
from harness.nodehost import unmount_under

__all__ = [
    "CACHE",
    "COMPONENTS",
    "DEBIAN_PACKAGES",
    "REGISTRY",
    "VERSION",
    "KubeVirtBuild",
    "KubeVirtBuildError",
    "build",
    "containerdisk",
    "go_env",
    "image_name",
    "main",
    "marker_containerdisk",
    "source",
    "write_archive",
]

VERSION = "v1.7.0"
COMMIT = "50b9b4d0cf1caaf56147411a1e6765134e0e82b9"  # the tag, as the proxy's .Origin says
MODULE = "kubevirt.io/kubevirt"
# The images' names: `spec.imageRegistry`/`imageTag` default to the operator's own.
REGISTRY = "localhost/kubevirt"
NAMESPACE = "kubevirt"
CACHE = REPO_ROOT / ".cache" / "kubevirt"
# The host packages: virt-launcher's cgo links libvirt; debootstrap makes the root filesystem.
DEBIAN_PACKAGES = ("libvirt-dev", "pkg-config", "debootstrap", "gcc", "libc6-dev")
PACKAGES = (
    "./cmd/virt-operator",
    "./cmd/virt-api",
    "./cmd/virt-controller",
    "./cmd/virt-handler",
    "./cmd/virt-launcher",
    "./cmd/virt-launcher-monitor",
    "./cmd/virt-probe",
    "./cmd/virt-tail",
    "./cmd/virt-chroot",
    "./cmd/virt-freezer",
    "./tools/manifest-templator",
)
SUITE = "trixie"
# What the launcher (virtqemud, virtlogd, virsh, QEMU, qemu-img) and the handler (ip, nft)
# run; node-labeller.sh needs bash and virsh.
ROOTFS_PACKAGES = (
    "libvirt-daemon",
    "libvirt-daemon-driver-qemu",
    "libvirt-daemon-log",
    "libvirt-clients",
    "qemu-system-x86",
    "qemu-utils",
    "seabios",
    "ipxe-qemu",
    "iproute2",
    "nftables",
    "procps",
    "tar",
    "xorriso",
)
CAP_NET_BIND_SERVICE = 10
QEMU_UID = 107  # upstream's qemu user and group, which own a containerDisk's disk
NONROOT_UID = "1001"  # the user of upstream's operator, api and controller images
# Debian builds libvirt's monolithic daemon only: there is no virtqemud, which the launcher
# and node-labeller.sh start. libvirtd with the QEMU driver alone installed serves the same
# API from the same configuration; its socket is linked under virtqemud's name, where
# the non-root launcher connects (XDG_RUNTIME_DIR=/var/run).
VIRTQEMUD = """#!/bin/sh
mkdir -p /var/run/libvirt
ln -sf libvirt-sock /var/run/libvirt/virtqemud-sock
exec /usr/sbin/libvirtd "$@"
"""
# This machine's PID 1 (the sandbox's init) holds a capability root lacks here, so its
# /proc/1/root and /proc/1/ns/mnt, which virt-handler takes for the host's, cannot be
# opened. Where that is so, the kubelet's /proc entry (a process in the host's mount
# namespace) stands in for /proc/1 in virt-handler's container, before virt-handler starts;
# found first on PATH, as the DaemonSet runs `virt-handler`.
HANDLER_WRAPPER = """#!/bin/sh
if ! readlink /proc/1/ns/mnt >/dev/null 2>&1; then
    pid=$(pgrep -o -x kubelet) && mount --bind "/proc/$pid" /proc/1
fi
exec /usr/bin/virt-handler "$@"
"""
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Component:
    name: str
    entrypoint: str
    user: str  # "" for root


COMPONENTS = (
    Component("virt-operator", "/usr/bin/virt-operator", NONROOT_UID),
    Component("virt-api", "/usr/bin/virt-api", NONROOT_UID),
    Component("virt-controller", "/usr/bin/virt-controller", NONROOT_UID),
    Component("virt-handler", "/usr/bin/virt-handler", ""),
    Component("virt-launcher", "/usr/bin/virt-launcher", ""),
)
_STAMP = "BUILT"


class KubeVirtBuildError(RuntimeError):
    """A step failed; the message names the command and where its log is."""


def image_name(component: str) -> str:
    return f"{REGISTRY}/{component}:{VERSION}"


@dataclass(frozen=True)
class KubeVirtBuild:
    """What `build()` made: the images' archive and the two manifests a user applies."""

    archive: Path
    operator_manifest: Path
    cr_manifest: Path
    binaries: Path
    timings: dict[str, float]


def _run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
) -> str:
    """Run a command; its output to `log` when given (the tail shown on failure)."""
    sink = log.open("wb") if log else subprocess.PIPE
    try:
        result = subprocess.run(
            list(argv),
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    finally:
        if log:
            sink.close()  # type: ignore[union-attr]
    output = log.read_text(errors="replace") if log else result.stdout.decode(errors="replace")
    if result.returncode != 0:
        tail = "\n".join(output.splitlines()[-20:])
        where = f" (log: {log})" if log else ""
        raise KubeVirtBuildError(f"{tail}\nkubevirt: {' '.join(argv)} failed{where}")
    return output


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def go_env() -> dict[str, str]:
    # The module is built as a module of its own: no workspace, go.sum completed on the way.
    # The compiler's flags are the binaries' own, so that `harness.kubevirt_crds`' `go run`
    # finds their packages compiled.
    return {**os.environ, "GOWORK": "off", "GOFLAGS": goflags("-mod=mod")}


def source(cache: Path = CACHE) -> Path:
    """The module's source, writable, with the staging replaces dropped (once)."""
    tree = cache / "src"
    stamp = tree / _STAMP
    if stamp.is_file() and stamp.read_text().strip() == VERSION:
        return tree
    cache.mkdir(parents=True, exist_ok=True)  # the first step of a fresh clone's build
    listing = json.loads(
        _run(["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"], cwd=cache, env=go_env())
    )
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(listing["Dir"], tree)
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    _run(
        [
            "go",
            "mod",
            "edit",
            "-dropreplace=kubevirt.io/api",
            "-dropreplace=kubevirt.io/client-go",
            f"-require=kubevirt.io/api@{VERSION}",
            f"-require=kubevirt.io/client-go@{VERSION}",
        ],
        cwd=tree,
        env=go_env(),
    )
    for name in ("go.work", "go.work.sum"):
        (tree / name).unlink(missing_ok=True)
    (tree / _STAMP).write_text(VERSION + "\n")
    return tree


def _ldflags() -> str:
    base = "kubevirt.io/client-go/version"
    return " ".join(
        [
            f"-X {base}.gitVersion={VERSION}",
            f"-X {base}.gitCommit={COMMIT}",
            f"-X {base}.gitTreeState=clean",
            f"-X {base}.buildDate=2025-11-22T00:00:00Z",
        ]
    )


def _host_inputs() -> str:
    """What the binaries depend on besides the source: Go's and libvirt-dev's versions."""
    go = _run(["go", "version"]).strip()
    libvirt = _run(["pkg-config", "--modversion", "libvirt"]).strip()
    return f"{go} libvirt {libvirt}"


def binaries(tree: Path, cache: Path = CACHE) -> Path:
    """Every binary of the images, in a folder named by a key of the inputs."""
    key = _key(VERSION, *build_flags(_ldflags()), *PACKAGES, _host_inputs())
    out = cache / f"bin-{key}"
    if (out / _STAMP).exists():
        return out
    partial = cache / f".bin-{key}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _run(
        ["go", "build", *build_flags(_ldflags()), "-o", str(partial) + "/", *PACKAGES],
        cwd=tree,
        env=go_env(),
        log=cache / "go-build.log",
    )
    _run(
        [
            "gcc",
            "-static",
            "-O2",
            "-o",
            str(partial / "container-disk"),
            str(tree / "cmd" / "container-disk-v2alpha" / "main.c"),
        ]
    )
    (partial / _STAMP).write_text(f"{MODULE}@{VERSION}\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def _chroot_install(root: Path, log: Path) -> None:
    """apt-get install ROOTFS_PACKAGES inside `root`, with /proc mounted for the
    maintainer scripts and the host's resolver; both undone afterwards."""
    shutil.copy2("/etc/resolv.conf", root / "etc" / "resolv.conf")
    _run(["mount", "-t", "proc", "proc", str(root / "proc")])
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(
            [
                "chroot",
                str(root),
                "apt-get",
                "install",
                "-y",
                "--no-install-recommends",
                *ROOTFS_PACKAGES,
            ],
            env=env,
            log=log,
            timeout=1800,
        )
        _run(["chroot", str(root), "apt-get", "clean"])
    finally:
        unmount_under(root)
    (root / "etc" / "resolv.conf").write_text("")


def rootfs(cache: Path = CACHE) -> Path:
    """The tar of the debootstrapped trixie root filesystem the images share (once)."""
    target = cache / f"{SUITE}-{_key(SUITE, *ROOTFS_PACKAGES)}.tar"
    if target.is_file():
        return target
    root = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=cache))
    try:
        # Bookworm's debootstrap orders trixie's systemd wrongly when it installs the
        # packages itself (a pre-dependency error): apt in the chroot installs them.
        _run(
            ["debootstrap", "--variant=minbase", SUITE, str(root), apt_mirror()],
            log=cache / "debootstrap.log",
            timeout=1800,
        )
        _chroot_install(root, cache / "debootstrap-apt.log")
        pack_root(root, target)
    finally:
        unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)
    return target


def manifests(tree: Path, bins: Path, cache: Path = CACHE) -> tuple[Path, Path]:
    """kubevirt-operator.yaml and kubevirt-cr.yaml, rendered as hack/build-manifests.sh
    does: file includes first, then the variables (registry, tag, namespace)."""
    out = cache / f"manifests-{bins.name.removeprefix('bin-')}-{_key(REGISTRY, NAMESPACE)}"
    wanted = (out / "kubevirt-operator.yaml", out / "kubevirt-cr.yaml")
    if all(path.is_file() for path in wanted):
        return wanted
    out.mkdir(parents=True, exist_ok=True)
    templator = str(bins / "manifest-templator")
    for target in wanted:
        source_file = tree / "manifests" / "release" / f"{target.name}.in"
        included = _run(
            [
                templator,
                "--process-files",
                f"--generated-manifests-dir={tree}/manifests/generated/",
                f"--input-file={source_file}",
            ]
        )
        staged = out / f"{target.name}.in.tmp"
        staged.write_text(included)
        rendered = _run(
            [
                templator,
                "--process-vars",
                f"--namespace={NAMESPACE}",
                f"--container-prefix={REGISTRY}",
                f"--container-tag={VERSION}",
                "--cdi-namespace=cdi",
                f"--csv-version={VERSION.removeprefix('v')}",
                "--image-pull-policy=IfNotPresent",
                "--verbosity=2",
                "--package-name=kubevirt",
                f"--kubevirt-logo-path={tree}/assets/kubevirt_logo.png",
                f"--input-file={staged}",
            ]
        )
        staged.unlink()
        target.write_text(rendered.rstrip("\n") + "\n")
    return wanted


# --- the images ----------------------------------------------------------------------


def _add_bytes(
    tar: tarfile.TarFile,
    name: str,
    data: bytes,
    mode: int = 0o644,
    xattrs: dict[str, bytes] | None = None,
) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    # Binary values pass through PAX as raw bytes (tarfile writes hdrcharset=BINARY).
    info.pax_headers = {
        f"SCHILY.xattr.{key}": value.decode("utf-8", "surrogateescape")
        for key, value in (xattrs or {}).items()
    }
    tar.addfile(info, io.BytesIO(data))


def _file_capability(*caps: int) -> bytes:
    """security.capability's value (VFS_CAP_REVISION_2) granting `caps` permitted and
    effective, as `setcap cap_...+ep` writes it."""
    permitted = sum(1 << cap for cap in caps)
    return struct.pack("<IIIII", 0x02000000 | 0x1, permitted & 0xFFFFFFFF, 0, permitted >> 32, 0)


def _add_dir(tar: tarfile.TarFile, name: str, uid: int = 0) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, uid, uid
    tar.addfile(info)


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    tar.addfile(info)


def _accounts(root_tar: Path) -> tuple[bytes, bytes]:
    """trixie's /etc/passwd and /etc/group with upstream's qemu user and group (107)."""
    with tarfile.open(root_tar) as tar:
        files = [tar.extractfile(f"./etc/{name}") for name in ("passwd", "group")]
        passwd, group = (f.read().decode() if f else "" for f in files)
    passwd += f"qemu:x:{QEMU_UID}:{QEMU_UID}:qemu:/home/qemu:/bin/bash\n"
    passwd += f"nonroot:x:{NONROOT_UID}:{NONROOT_UID}::/home/nonroot:/usr/sbin/nologin\n"
    group += f"qemu:x:{QEMU_UID}:\n"
    return passwd.encode(), group.encode()


def _kubevirt_layer(tree: Path, bins: Path, root_tar: Path, layer: Path) -> None:
    """KubeVirt's binaries in /usr/bin and the launcher's configuration, as upstream's
    BUILD files place them."""
    launcher = tree / "cmd" / "virt-launcher"
    passwd, group = _accounts(root_tar)
    with tarfile.open(layer, "w") as tar:
        for binary in sorted(bins.iterdir()):
            if binary.name not in (_STAMP, "manifest-templator"):
                # virt-launcher-monitor (uid 107) hands NET_BIND_SERVICE to virt-launcher as
                # an ambient capability: it holds it from the file, as upstream's image.
                xattrs = {"security.capability": _file_capability(CAP_NET_BIND_SERVICE)}
                extra = xattrs if binary.name == "virt-launcher-monitor" else None
                _add_bytes(tar, f"usr/bin/{binary.name}", binary.read_bytes(), 0o755, extra)
        _add_bytes(
            tar,
            "usr/bin/node-labeller.sh",
            (launcher / "node-labeller" / "node-labeller.sh").read_bytes(),
            0o755,
        )
        _add_bytes(tar, "etc/libvirt/qemu.conf", (launcher / "qemu.conf").read_bytes())
        _add_bytes(tar, "etc/libvirt/virtqemud.conf", (launcher / "virtqemud.conf").read_bytes())
        _add_bytes(tar, "etc/libvirt/hooks/qemu", (launcher / "qemu").read_bytes(), 0o755)
        _add_bytes(tar, "usr/sbin/virtqemud", VIRTQEMUD.encode(), 0o755)
        _add_bytes(tar, "usr/local/bin/virt-handler", HANDLER_WRAPPER.encode(), 0o755)
        _add_bytes(tar, "etc/nsswitch.conf", (launcher / "nsswitch.conf").read_bytes())
        _add_bytes(tar, "etc/passwd", passwd)
        _add_bytes(tar, "etc/group", group)
        _add_dir(tar, "home/qemu", QEMU_UID)
        # Debian links /var/run to /run absolutely; virt-handler resolves launcher paths as
        # /proc/<pid>/root/var/run/..., which an absolute link takes to the host's /run.
        # Relative, as in upstream's (CentOS) images.
        for link, target in (("var/run", "../run"), ("var/lock", "../run/lock")):
            _add_symlink(tar, link, target)
        _add_dir(tar, "usr/lib64/qemu-kvm")


def _sha256(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _config(diff_ids: list[str], entrypoint: str = "", user: str = "") -> bytes:
    config: dict[str, object] = {"Env": [f"PATH={PATH}"]}
    if entrypoint:
        config["Entrypoint"] = [entrypoint]
    if user:
        config["User"] = user
    return json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        },
        sort_keys=True,
    ).encode()


def write_archive(layers: list[Path], images: dict[str, tuple[str, str]], archive: Path) -> None:
    """A docker-archive of `images` (name -> entrypoint, user), each over the same
    `layers` (uncompressed layer tars), which it holds once."""
    diff_ids = [_sha256(layer) for layer in layers]
    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        names = []
        for digest, layer in zip(diff_ids, layers, strict=True):
            names.append(f"{digest}/layer.tar")
            tar.add(layer, arcname=names[-1])
        listing = []
        for name, (entrypoint, user) in images.items():
            config = _config(diff_ids, entrypoint, user)
            config_name = f"{hashlib.sha256(config).hexdigest()}.json"
            _add_bytes(tar, config_name, config)
            listing.append({"Config": config_name, "RepoTags": [name], "Layers": names})
        _add_bytes(tar, "manifest.json", json.dumps(listing).encode())
    partial.rename(archive)


def images(tree: Path, bins: Path, root_tar: Path, cache: Path = CACHE) -> Path:
    """The components' images as one docker-archive, remade when an input changed."""
    # The recipe is this module: any change to it makes the images again.
    recipe = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    inputs = _key(bins.name, root_tar.name, recipe)
    archive = cache / f"kubevirt-{VERSION}.tar"
    stamp = archive.with_name(archive.name + ".inputs")
    if archive.is_file() and stamp.is_file() and stamp.read_text() == inputs:
        return archive
    stamp.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kubevirt-layer-", dir=cache) as folder:
        layer = Path(folder) / "kubevirt.tar"
        _kubevirt_layer(tree, bins, root_tar, layer)
        components = {image_name(c.name): (c.entrypoint, c.user) for c in COMPONENTS}
        write_archive([root_tar, layer], components, archive)
    stamp.write_text(inputs)
    return archive


# virt-handler (v1.7.0, and v1.8.1 still) writes the CRC32 of a containerDisk's disk, a
# uint32, into the VMI's status, where KubeVirt's own CRD says int32: from 2^31 on,
# kube-apiserver refuses every status update ("Checked value must be of type integer with
# format int32 in status.volumeStatus[0].containerDiskVolume.checksum") and the VMI never
# becomes ready (kubevirt/kubevirt#17469, merged on main after v1.8.1). So the disk of a
# containerDisk built here ends in one more sector, of which 4 bytes keep its CRC32 lower.
INT32_MAX = 2**31 - 1
SECTOR = 512


def crc_sector(disk: Path) -> bytes:
    """A sector which, appended to `disk`, makes their CRC32 (KubeVirt's checksum) at most
    INT32_MAX: a little-endian counter, then zeros; the first counter that does."""
    crc = 0
    with disk.open("rb") as data:
        while chunk := data.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    for counter in itertools.count():
        sector = counter.to_bytes(4, "little") + bytes(SECTOR - 4)
        if zlib.crc32(sector, crc) <= INT32_MAX:
            return sector
    raise AssertionError("unreachable: half of all counters do")


def containerdisk(disk: Path, name: str, cache: Path = CACHE) -> Path:
    """A containerDisk image `name` holding the raw `disk` at /disk/, owned by qemu (107),
    as KubeVirt's docs build one (`ADD --chown=107:107 disk.img /disk/`), past its end the
    sector `crc_sector` gives it (outside every partition: the guest never reads it)."""
    archive = cache / f"containerdisk-{disk.stem}-crc31.tar"
    if archive.is_file():
        return archive
    with tempfile.TemporaryDirectory(prefix="containerdisk-", dir=cache) as folder:
        padded = Path(folder) / disk.name
        shutil.copyfile(disk, padded)
        with padded.open("ab") as out:
            out.write(crc_sector(disk))
        layer = Path(folder) / "disk.tar"
        with tarfile.open(layer, "w") as tar:
            _add_dir(tar, "disk", QEMU_UID)
            info = tar.gettarinfo(str(padded), f"disk/{disk.name}")
            info.uid = info.gid = QEMU_UID
            info.uname = info.gname = ""
            info.mode, info.mtime = 0o440, 0
            with padded.open("rb") as data:
                tar.addfile(info, data)
        write_archive([layer], {name: ("", "")}, archive)
    return archive


def marker_containerdisk(cache: Path = CACHE) -> tuple[Path, str]:
    """The SeaBIOS marker guest (`harness.guest`) as a containerDisk: its archive and name."""
    disk = build_marker_guest()
    name = f"{REGISTRY}/marker-guest-containerdisk:{disk.stem.rsplit('-', 1)[-1]}"
    return containerdisk(disk, name, cache), name


def build(cache: Path = CACHE) -> KubeVirtBuild:
    """Every step, each skipped when its cached result is current; with the time of each."""
    cache.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    def timed(what: str, started: float) -> None:
        timings[what] = round(time.monotonic() - started, 1)

    begin = time.monotonic()
    tree = source(cache)
    timed("source", begin)
    now = time.monotonic()
    bins = binaries(tree, cache)
    timed("binaries", now)
    now = time.monotonic()
    root_tar = rootfs(cache)
    timed("rootfs (debootstrap trixie)", now)
    now = time.monotonic()
    operator, cr = manifests(tree, bins, cache)
    timed("manifests", now)
    now = time.monotonic()
    archive = images(tree, bins, root_tar, cache)
    timed("images", now)
    timed("total", begin)
    if timings["total"] >= 1:  # the last run that built something
        (cache / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    return KubeVirtBuild(archive, operator, cr, bins, timings)


def main(argv: Sequence[str] | None = None) -> int:
    del argv  # no options
    try:
        built = build()
    except (KubeVirtBuildError, subprocess.TimeoutExpired) as error:
        print(f"kubevirt: {error}", file=sys.stderr)
        return 1
    size = built.archive.stat().st_size / 1e6
    print(
        f"kubevirt: {VERSION} images in {built.archive} ({size:.0f} MB), manifests "
        f"{built.operator_manifest} and {built.cr_manifest}; times {built.timings}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
