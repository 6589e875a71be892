"""The provisioner plug-in interface.

A provisioner turns one instance (its Exporter and an `InstanceContext`) into what runs
it, and states the facts that belong to it: its name (the value of a class's
`provisioner`) and its default images. The parts every provisioner shares (the Exporter,
the config Secret around the drivers) are `pool.rendering.render`'s; parameters are
checked by `api.provisioners.check`. Pure: rendering returns dicts, it never calls the
API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pool.rendering.render import Image, InstanceContext

__all__ = ["Provisioner"]


class Provisioner(Protocol):
    name: str
    default_images: Mapping[str, Image]

    def drivers(self, ctx: InstanceContext) -> list[dict[str, Any]]:
        """The template's drivers as this provisioner runs them (the config's `export`)."""
        ...

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        """The Pod of one instance (name, labels and ownerReference included)."""
        ...
