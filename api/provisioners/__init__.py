"""Parameter models of the provisioners this project knows.

`PARAMETER_MODELS` maps a VirtualTargetClass `provisioner` to the Pydantic model its
`parameters` (a class's own, and the set's deep-merged over them) must satisfy;
`api.provisioners.check` applies it. Provisioners not listed are validated by their own
controllers. No I/O.
"""

from __future__ import annotations

from pydantic import BaseModel

from api.provisioners.qemu import PROVISIONER as QEMU
from api.provisioners.qemu import QemuParameters

__all__ = ["PARAMETER_MODELS"]

PARAMETER_MODELS: dict[str, type[BaseModel]] = {QEMU: QemuParameters}
