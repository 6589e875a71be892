"""The provisioner plug-in interface.

A provisioner turns one instance (its Exporter and an `InstanceContext`) into the
workload that runs it, and states the facts that belong to it: its name (the value of
a class's `provisioner`), its default images, and how to check merged parameters.
Pure: rendering returns dicts, it never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from reconciler.render import Image, InstanceContext

__all__ = ["Provisioner"]


class Provisioner(Protocol):
    name: str
    default_images: Mapping[str, Image]

    def parameter_errors(self, parameters: Mapping[str, Any]) -> list[str]:
        """Why the merged parameters are unusable; empty when they are fine."""
        ...

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        """The Pod of one instance (name, labels and ownerReference included)."""
        ...
