"""Parameter models and default images of the provisioners this project knows.

`DEFAULT_IMAGES` maps a provisioner to the image of each container role it runs unless a
class or set names another (the image allow-list always admits these);
`PARAMETER_MODELS` maps a VirtualTargetClass `provisioner` to the Pydantic model its
`parameters` (a class's own, and the set's deep-merged over them) must satisfy;
`api.provisioners.check` applies it, and warns of the keys `RENAMED_PARAMETERS` lists
(a provisioner's (old path, new path) pairs); `SHIPPED_IMAGES` are the instance images this
project ships itself (the image allow-list admits these too). Provisioners not listed
are validated by their own controllers. No I/O.
"""

from __future__ import annotations

from pydantic import BaseModel

from api.provisioners.kubevirt import DEFAULT_IMAGES as KUBEVIRT_IMAGES
from api.provisioners.kubevirt import KUBEVIRT_EXPORTER_IMAGE, KubevirtParameters
from api.provisioners.kubevirt import PROVISIONER as KUBEVIRT
from api.provisioners.qemu import DEFAULT_IMAGES as QEMU_IMAGES
from api.provisioners.qemu import PROVISIONER as QEMU
from api.provisioners.qemu import QEMU_EXPORTER_IMAGE, QemuParameters
from api.provisioners.qemu_storage import RENAMED as QEMU_RENAMED

__all__ = ["DEFAULT_IMAGES", "PARAMETER_MODELS", "RENAMED_PARAMETERS", "SHIPPED_IMAGES"]

PARAMETER_MODELS: dict[str, type[BaseModel]] = {
    QEMU: QemuParameters,
    KUBEVIRT: KubevirtParameters,
}
RENAMED_PARAMETERS: dict[str, tuple[tuple[str, str], ...]] = {QEMU: QEMU_RENAMED}
DEFAULT_IMAGES: dict[str, dict[str, str]] = {QEMU: QEMU_IMAGES, KUBEVIRT: KUBEVIRT_IMAGES}
SHIPPED_IMAGES: tuple[str, ...] = (QEMU_EXPORTER_IMAGE, KUBEVIRT_EXPORTER_IMAGE)
