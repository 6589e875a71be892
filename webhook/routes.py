"""The kinds this webhook serves and the paths it serves them on, derived from one table.

kubebuilder's convention: `/mutate-<group with dots as dashes>-<version>-<kind lowercase>`
and `/validate-…`. The deploy manifests' test reads `ENDPOINTS` to check that every path
its webhook configurations name is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["ENDPOINTS", "KINDS", "Endpoint", "Kind", "Role"]


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def qualified(self) -> str:
        """`ExporterSet.virtualtarget.jumpstarter.dev`, as apiserver error messages name it."""
        return f"{self.kind}.{self.group}"


class Role(Enum):
    MUTATE = "mutate"
    VALIDATE = "validate"


@dataclass(frozen=True)
class Endpoint:
    kind: Kind
    role: Role

    @property
    def path(self) -> str:
        group = self.kind.group.replace(".", "-")
        return f"/{self.role.value}-{group}-{self.kind.version}-{self.kind.kind.lower()}"


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind(
            "VirtualTargetClass",
            "virtualtarget.jumpstarter.dev",
            "v1alpha1",
            "virtualtargetclasses",
        ),
        Kind("ExporterSet", "virtualtarget.jumpstarter.dev", "v1alpha1", "exportersets"),
        Kind("Exporter", "jumpstarter.dev", "v1alpha1", "exporters"),
    )
}

ENDPOINTS: tuple[Endpoint, ...] = tuple(
    Endpoint(kind, role) for kind in KINDS.values() for role in Role
)
