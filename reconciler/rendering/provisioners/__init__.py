"""Provisioner plug-ins, by the name a VirtualTargetClass gives in `provisioner`.

Adding a backend means adding a module with a `Provisioner` and one line here.
"""

from __future__ import annotations

from reconciler.rendering.provisioners.base import Provisioner
from reconciler.rendering.provisioners.qemu import QemuProvisioner

__all__ = ["PROVISIONERS", "Provisioner", "provisioner"]

PROVISIONERS: dict[str, Provisioner] = {p.name: p for p in (QemuProvisioner(),)}


def provisioner(name: str) -> Provisioner:
    """The plug-in named `name`; KeyError with the known names otherwise."""
    try:
        return PROVISIONERS[name]
    except KeyError:
        known = ", ".join(sorted(PROVISIONERS))
        raise KeyError(f"unknown provisioner {name!r} (known: {known})") from None
