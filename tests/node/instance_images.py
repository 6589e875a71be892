"""The instance images of the node tier: test stand-ins for Jumpstarter's two images.

Built here, from `tests/node/images/<role>/Dockerfile` on the same local Debian base as the
product image (`virtualtarget.images`), under the names the qemu provisioner uses by
default (`reconciler.rendering.provisioners.qemu.DEFAULT_IMAGES`), so a pool needs no image override
and the Pods use them with the default pull policy (nothing can be pulled on the node).

- exporter: the real `jmp run` and drivers of the Jumpstarter release
  (`reconciler.model.jumpstarter.JUMPSTARTER_RELEASE`) from PyPI, and a placeholder
  `/jumpstarter/bin/jumpstarter-exec` (the real one is not published);
- runtime: nothing real, Debian's busybox-static (`/bin/busybox`, copied into the build
  context) sleeping until SIGTERM: a 2 MB image instead of a second copy of the base.

Both say so in their labels (`virtualtarget.jumpstarter.dev/stand-in-for`, `.../real`,
`.../stand-in`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.model.jumpstarter import JUMPSTARTER_RELEASE
from reconciler.rendering.provisioners.qemu import DEFAULT_IMAGES

__all__ = ["IMAGES_DIR", "INSTANCE_IMAGES", "InstanceImage", "build_instance_images"]

IMAGES_DIR = Path(__file__).parent / "images"
STAND_IN_LABEL = "virtualtarget.jumpstarter.dev/stand-in-for"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: one static binary


@dataclass(frozen=True)
class InstanceImage:
    role: str  # the provisioner's image role: exporter, runtime

    @property
    def name(self) -> str:
        return DEFAULT_IMAGES[self.role].image

    @property
    def context(self) -> Path:
        return IMAGES_DIR / self.role

    def archive(self, cache: Path) -> Path:
        return cache / f"instance-{self.role}.tar"


INSTANCE_IMAGES = (InstanceImage("exporter"), InstanceImage("runtime"))


def build_instance_images(cache: Path | None = None) -> Mapping[str, Path]:
    """Build both stand-ins into docker-archives (buildah's layer cache keeps a rebuild of
    unchanged inputs short); image name -> archive."""
    from virtualtarget import images  # the product image's builder: one way to build

    cache = cache or images.CACHE
    base = images.ensure_base(cache)
    if not BUSYBOX.is_file():
        raise images.ImageError(f"no {BUSYBOX}: apt-get install -y busybox-static")
    archives: dict[str, Path] = {}
    for image in INSTANCE_IMAGES:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"context-{image.role}-", dir=cache) as folder:
            context = Path(folder)
            shutil.copytree(image.context, context, dirs_exist_ok=True)
            if image.role == "runtime":
                shutil.copy2(BUSYBOX, context / "busybox")
            archives[image.name] = images.build(
                context,
                image.archive(cache),
                image.name,
                build_args={"BASE": base, "RELEASE": JUMPSTARTER_RELEASE},
                cache=cache,
            )
        print(f"node: {image.name} (test stand-in) in {time.monotonic() - started:.0f} s")
    return archives
