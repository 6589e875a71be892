"""Container images for the node tier, made on this machine: no registry is reachable.

An image is a root filesystem packed by umoci into an OCI layout and written here as a
docker-archive (the `docker save` layout), which `ctr -n k8s.io images import` loads
into the node's containerd (an OCI archive would keep a short name the CRI does not
match). Written here rather than by skopeo, which keeps a cache under /var/lib/containers:
everything stays in the work folder. Two are made
here: the sandbox (pause) image, compiled from `build/pause/linux/pause.c` of the
k8s.io/kubernetes module `tools/control-plane` builds from, and a busybox image from
Debian's busybox-static for trying the cluster and for the tests.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.controlplane import REPO_ROOT

__all__ = [
    "BUSYBOX_IMAGE",
    "PAUSE_IMAGE",
    "ImageError",
    "busybox_archive",
    "import_archive",
    "kubernetes_module",
    "normalize",
    "pause_archive",
]

CP_MODULE = REPO_ROOT / "tools" / "control-plane"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static
# Names of the form the CRI resolves to (a registry host first), so nothing is pulled.
PAUSE_IMAGE = "localhost/virtualtarget/pause:{version}"
BUSYBOX_IMAGE = "localhost/virtualtarget/busybox:1"
NOBODY = "65535:65535"  # the pause image's user, as upstream's


class ImageError(RuntimeError):
    """An image could not be made or imported; the message names the failing command."""


def _run(argv: Sequence[str], cwd: Path | None = None) -> str:
    try:
        result = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=300, check=False, cwd=cwd
        )
    except FileNotFoundError as error:
        raise ImageError(f"{argv[0]} not found: {error}") from None
    if result.returncode != 0:
        raise ImageError(f"{' '.join(argv)} failed: {result.stderr.strip() or result.stdout}")
    output: str = result.stdout
    return output


def kubernetes_module() -> tuple[Path, str]:
    """The k8s.io/kubernetes module's folder in the Go module cache and its version,
    as tools/control-plane/go.mod requires it (downloaded if it is not there yet)."""
    line = _run(
        ["go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "k8s.io/kubernetes"], cwd=CP_MODULE
    ).split()
    if len(line) != 2 or not line[0]:  # .Dir is empty until the module is downloaded
        _run(["go", "mod", "download", "k8s.io/kubernetes"], cwd=CP_MODULE)
        return kubernetes_module()
    return Path(line[0]), line[1]


def normalize(name: str) -> str:
    """The full reference the CRI looks an image up by (docker's rules):
    `busybox` -> `docker.io/library/busybox:latest`, `localhost/a:1` stays."""
    first, _, rest = name.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}" if rest else f"docker.io/library/{name}"
    last = name.rsplit("/", 1)[1]
    if ":" not in last and "@" not in last:
        name += ":latest"
    return name


def build_archive(
    folder: Path,
    name: str,
    populate: Callable[[Path], None],
    config: Sequence[str],
) -> Path:
    """An image `name` whose root filesystem `populate(rootfs)` fills, with umoci config
    options `config`; written to `folder/image.tar` as a docker-archive."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    layout, bundle, archive = folder / "oci", folder / "bundle", folder / "image.tar"
    _run(["umoci", "init", "--layout", str(layout)])
    _run(["umoci", "new", "--image", f"{layout}:image"])
    _run(["umoci", "unpack", "--image", f"{layout}:image", str(bundle)])
    populate(bundle / "rootfs")
    _run(["umoci", "repack", "--image", f"{layout}:image", str(bundle)])
    _run(
        [
            "umoci",
            "config",
            "--image",
            f"{layout}:image",
            "--architecture",
            "amd64",
            "--os",
            "linux",
            *config,
        ]
    )
    write_docker_archive(layout, name, archive)
    shutil.rmtree(bundle)
    shutil.rmtree(layout)
    return archive


def write_docker_archive(layout: Path, name: str, archive: Path) -> None:
    """The OCI layout's one image as a docker-archive tagged `name`: its config, its layers
    uncompressed, and a manifest.json naming them."""
    blobs = layout / "blobs" / "sha256"

    def blob(digest: str) -> Path:
        return blobs / digest.removeprefix("sha256:")

    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    manifest = json.loads(blob(entry["digest"]).read_text())
    config = manifest["config"]["digest"].removeprefix("sha256:")
    with tarfile.open(archive, "w") as tar:
        tar.add(blob(config), arcname=f"{config}.json")
        layers = []
        for index, layer in enumerate(manifest["layers"]):
            path = archive.parent / f"layer-{index}.tar"
            opener = gzip.open if layer["mediaType"].endswith("+gzip") else open
            with opener(blob(layer["digest"]), "rb") as source, path.open("wb") as target:
                shutil.copyfileobj(source, target)
            layers.append(f"layer-{index}/layer.tar")
            tar.add(path, arcname=layers[-1])
            path.unlink()
        listing = [{"Config": f"{config}.json", "RepoTags": [name], "Layers": layers}]
        data = json.dumps(listing).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def pause_archive(folder: Path) -> tuple[Path, str]:
    """The sandbox image, built from the Kubernetes module's own pause.c; its archive and
    name."""
    module, version = kubernetes_module()
    source = module / "build" / "pause" / "linux" / "pause.c"
    name = PAUSE_IMAGE.format(version=version)

    def populate(rootfs: Path) -> None:
        binary = rootfs / "pause"
        _run(["gcc", "-Os", "-static", f"-DVERSION={version}", "-o", str(binary), str(source)])
        _run(["strip", str(binary)])

    config = ["--config.entrypoint", "/pause", "--config.user", NOBODY]
    return build_archive(folder, name, populate, config), name


def busybox_archive(folder: Path) -> tuple[Path, str]:
    """A busybox image (every applet linked, a root user): its archive and name."""
    if not os.access(BUSYBOX, os.X_OK):
        raise ImageError(f"{BUSYBOX} not found: apt-get install -y busybox-static")
    applets = _run([str(BUSYBOX), "--list"]).split()

    def populate(rootfs: Path) -> None:
        for sub in ("bin", "tmp", "etc"):
            (rootfs / sub).mkdir(exist_ok=True)
        shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
        for applet in applets:
            if applet != "busybox":
                (rootfs / "bin" / applet).symlink_to("busybox")
        (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (rootfs / "etc" / "group").write_text("root:x:0:\n")

    config = ["--config.cmd", "/bin/sh", "--config.env", "PATH=/bin"]
    return build_archive(folder, BUSYBOX_IMAGE, populate, config), BUSYBOX_IMAGE


_UNPACKED = re.compile(r"^unpacking (\S+) \(")


def import_archive(ctr: Sequence[str], archive: Path, name: str | None = None) -> str:
    """Load a docker-archive into containerd's `k8s.io` namespace (where the CRI looks)
    with `ctr` (the command and its socket, e.g. `NodeCluster.ctr`), under `name` when
    given (else the archive's own tag). Returns the name as the CRI resolves it."""
    if not archive.is_file():
        raise ImageError(f"no image archive at {archive}")
    output = _run([*ctr, "images", "import", str(archive)])
    imported = [m.group(1) for line in output.splitlines() if (m := _UNPACKED.match(line))]
    if name is None:
        if len(imported) != 1:
            raise ImageError(f"{archive} holds {len(imported) or 'no'} tagged images; name one")
        return imported[0]
    wanted = normalize(name)
    if wanted not in imported:
        if not imported:
            raise ImageError(f"{archive} holds no tagged image to name {wanted}")
        _run([*ctr, "images", "tag", "--force", imported[0], wanted])
    return wanted
