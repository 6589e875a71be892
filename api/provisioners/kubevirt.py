"""Parameters of the `kubevirt.jumpstarter.dev` provisioner, as Jumpstarter's pull request
#927 designs it (`controller/internal/exporterset/provisioners/kubevirt/params.go`, and
the parameter table of its guide `kubevirt-provisioner.md`), so a class or set written
for it is admitted here unchanged:

- `namespace`: the namespace of the target cluster the VirtualMachines go to; required
  of the merged parameters (a class may leave it to its sets).
- `image`: the guest's containerDisk image; required of the merged parameters unless
  `storage.type` is `dataVolume`.
- `resources.cpu` (cores, default 2, 1 to 2^32-1 as KubeVirt's `uint32`),
  `resources.memory` (the guest's memory, default `4Gi`), `resources.storage` (the
  root disk's size, default `20Gi`; a `dataVolume`'s size where `storage` is absent).
- `sshAccess`: `""`, `NodePort` or `LoadBalancer`: a Service to the guest's port 22.
- `forwardPorts`: name -> guest port (1-65535), a Service each, of the SSH Service's
  type (`LoadBalancer` only where `sshAccess` is).
- `cloudInit`: cloud-init user data (a NoCloud disk).
- `storage.type` (`containerDisk` or `dataVolume`), `storage.size` (default `20Gi`: it
  replaces `resources.storage` wherever `storage` is given, as params.go:143 does),
  `storage.storageClassName`, `storage.accessModes` (default `[ReadWriteOnce]`), and one
  `storage.source`: `http.url`, `registry.image` or `pvc.name` (`pvc.namespace`).

Where #927's Go ignores a value of the wrong type (a number for `memory`, a string for
`cpu`) and uses its default, this refuses it; names and sizes are checked as the target
cluster would check what they become. Unknown keys are warnings, as for QEMU
(`api.provisioners.check`). What only the merged parameters can say (a required key, a
forward port that collides) is `merged_errors`'s. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator

from api.fielderrors import FieldError, join_path
from api.jumpstarter import JUMPSTARTER_RELEASE, JUMPSTARTER_REPOSITORIES
from api.provisioners.fields import OPEN
from api.provisioners.qemu_storage import ClaimStorage
from api.quantity import parse_quantity

__all__ = [
    "DEFAULT_CPU",
    "DEFAULT_DISK_SIZE",
    "DEFAULT_IMAGES",
    "DEFAULT_MEMORY",
    "INJECTED_DRIVERS",
    "KUBEVIRT_EXPORTER_IMAGE",
    "MAX_CPU",
    "PROVISIONER",
    "PUBLISHED_EXPORTER_IMAGE",
    "KubevirtParameters",
    "SshAccess",
    "StorageType",
    "merged_errors",
    "port_name_errors",
]

PROVISIONER = "kubevirt.jumpstarter.dev"
# The exporter image this project ships for KubeVirt pools (images/kubevirt-exporter):
# Jumpstarter's release with `jmp run` and pull request #927's KubeVirt driver, which no
# index publishes. #927's own default (kubevirt.go:45, `quay.io/jumpstarter-dev/jumpstarter`
# at the controller's version, kubevirt.go:87) carries no KubeVirt driver
# (`PUBLISHED_EXPORTER_IMAGE`), so an instance could not load its drivers from it.
KUBEVIRT_EXPORTER_IMAGE = (
    f"ghcr.io/jumpstarter-dev/virtualtarget-kubevirt-exporter:{JUMPSTARTER_RELEASE}"
)
PUBLISHED_EXPORTER_IMAGE = f"{JUMPSTARTER_REPOSITORIES}jumpstarter:{JUMPSTARTER_RELEASE}"
DEFAULT_IMAGES = {"exporter": KUBEVIRT_EXPORTER_IMAGE}
# params.go:27-29
DEFAULT_CPU = 2
DEFAULT_MEMORY = "4Gi"
DEFAULT_DISK_SIZE = "20Gi"
MAX_CPU = 2**32 - 1  # params.go:97, KubeVirt's `cpu.cores` is a uint32
# The drivers the provisioner adds by these names (kubevirt.go:571-575): a forward port
# of the same name would give the export two drivers of one name.
INJECTED_DRIVERS = ("power", "console", "storage")
_PARAMETERS = "spec.parameters"
# IANA_SVC_NAME, what KubeVirt's reference asks of an interface port's name.
_SVC_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_SVC_NAME_MAX = 15
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class StorageType(str, Enum):
    CONTAINER_DISK = "containerDisk"
    DATA_VOLUME = "dataVolume"


class SshAccess(str, Enum):
    NONE = ""
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


def _quantity(value: Any, example: str) -> str | None:
    """A positive quantity string (params.go:153-158 parses it; a number Go would ignore)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f'must be a quantity string such as "{example}"')
    if parse_quantity(value) <= 0:
        raise ValueError("must be greater than zero")
    return value


def _namespace(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("must be a namespace name, a string")
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError("a namespace must be a lowercase RFC 1123 label of at most 63 characters")
    return value


_NonEmpty = Annotated[str, Field(min_length=1)]


class KubevirtResources(BaseModel):
    model_config = OPEN

    cpu: Annotated[int, Field(ge=1, le=MAX_CPU, strict=True)] | None = None
    memory: str | None = None
    storage: str | None = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> str | None:
        return _quantity(value, DEFAULT_MEMORY)

    @field_validator("storage", mode="before")
    @classmethod
    def _storage(cls, value: Any) -> str | None:
        return _quantity(value, DEFAULT_DISK_SIZE)


class HttpSource(BaseModel):
    model_config = OPEN

    url: _NonEmpty  # params.go:199-202


class RegistrySource(BaseModel):
    model_config = OPEN

    image: _NonEmpty  # params.go:206-209


class PvcSource(BaseModel):
    model_config = OPEN

    name: _NonEmpty  # params.go:213-217
    namespace: str | None = None

    @field_validator("namespace", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> str | None:
        return _namespace(value)


class DiskSource(BaseModel):
    """One source of a DataVolume: Go takes the first of http, registry, pvc
    (kubevirt.go:254-268); CDI allows one, so a second is refused here."""

    model_config = OPEN

    http: HttpSource | None = None
    registry: RegistrySource | None = None
    pvc: PvcSource | None = None


class KubevirtStorage(ClaimStorage):
    type: StorageType | None = None
    size: str | None = None
    source: DiskSource | None = None

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: Any) -> str | None:
        return _quantity(value, DEFAULT_DISK_SIZE)


class KubevirtParameters(BaseModel):
    """Merged `parameters` of a class and set whose provisioner is kubevirt.jumpstarter.dev."""

    model_config = OPEN

    namespace: str | None = None
    image: Annotated[str, Field(min_length=1)] | None = None
    resources: KubevirtResources | None = None
    ssh_access: SshAccess | None = Field(default=None, alias="sshAccess")
    forward_ports: dict[str, Annotated[int, Field(ge=1, le=65535, strict=True)]] | None = Field(
        default=None, alias="forwardPorts"
    )
    cloud_init: str | None = Field(default=None, alias="cloudInit")
    storage: KubevirtStorage | None = None

    @field_validator("namespace", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> str | None:
        return _namespace(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def port_name_errors(parameters: Mapping[str, Any]) -> list[FieldError]:
    """`forwardPorts` names: each becomes an interface port's name (an IANA_SVC_NAME in
    KubeVirt's reference), a Service `<exporter>-<name>` and a driver of that name, so
    neither an injected driver's name nor (with `sshAccess`) `ssh`."""
    ports = _mapping(parameters.get("forwardPorts"))
    taken = {*INJECTED_DRIVERS, *(("ssh",) if parameters.get("sshAccess") else ())}
    errors = []
    for name in ports:
        field = join_path(f"{_PARAMETERS}.forwardPorts", str(name))
        if name in taken:
            errors.append(
                FieldError.invalid(field, name, f"the provisioner names its own {name} port")
            )
        elif len(name) > _SVC_NAME_MAX or "--" in name or not _SVC_NAME.fullmatch(name):
            errors.append(
                FieldError.invalid(
                    field,
                    name,
                    "must be an IANA_SVC_NAME: at most 15 lowercase letters, digits and '-', "
                    "at least one letter, no '-' at either end or twice in a row",
                )
            )
    return errors


def _sources(storage: Mapping[str, Any]) -> list[str]:
    source = _mapping(storage.get("source"))
    return [kind for kind in ("http", "registry", "pvc") if source.get(kind) is not None]


def merged_errors(parameters: Mapping[str, Any]) -> list[FieldError]:
    """What the merged parameters must say, as params.go:84-89, 148-151 and 222-224 ask
    of them: `namespace`, `image` unless the disk is a DataVolume, a DataVolume's source,
    and at most one source."""
    errors = []
    if not parameters.get("namespace"):
        errors.append(
            FieldError.required(
                f"{_PARAMETERS}.namespace", "the target cluster's namespace for the VMs"
            )
        )
    storage = _mapping(parameters.get("storage"))
    data_volume = storage.get("type") == StorageType.DATA_VOLUME.value
    if not parameters.get("image") and not data_volume:
        errors.append(
            FieldError.required(f"{_PARAMETERS}.image", "the containerDisk image of the guest")
        )
    sources = _sources(storage)
    if data_volume and not sources:
        errors.append(
            FieldError.required(
                f"{_PARAMETERS}.storage.source",
                "storage type dataVolume requires a source (http, registry, or pvc)",
            )
        )
    if len(sources) > 1:
        errors.append(
            FieldError.invalid(
                f"{_PARAMETERS}.storage.source",
                ", ".join(sources),
                "a DataVolume has one source: give one of http, registry, pvc",
            )
        )
    return errors
