"""The Exporter of one instance, its config Secret, and the inputs a provisioner renders
the instance's workload from.

Pure: the set and class arrive as raw dicts, the results are dicts to POST. The parts
every provisioner shares live here (name, labels, ownerReference, images resolved set >
class > provisioner default, scheduling, the class's credentials Secret, the Jumpstarter
`ExporterConfig` in its Secret); what the workload and its drivers look like is the
provisioner's (`pool.rendering.provisioners`). No I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from api.merge import deep_merge
from pool.model.access import EXPORTERS, EXPORTERSETS, SECRETS
from pool.model.defaults import spec_defaults
from pool.model.jumpstarter import (
    CONFIG_KEY,
    EXPORTER_CONFIG_API_VERSION,
    EXPORTER_CONFIG_KIND,
    config_secret_name,
)
from pool.model.keys import INSTANCE_LABEL, NAME_LABEL, SET_LABEL, instance_labels
from pool.model.views import RecycleStrategy

__all__ = [
    "Credentials",
    "Image",
    "InstanceContext",
    "config_secret",
    "config_text",
    "controller_ref",
    "export_map",
    "exporter_config",
    "instance_context",
    "merged_parameters",
    "render_config_secret",
    "render_exporter",
    "resolve_image",
]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Image:
    image: str
    pull_policy: str | None = None


@dataclass(frozen=True, slots=True)
class Credentials:
    """What Jumpstarter's controller issued for one Exporter, and the CA to trust it by."""

    endpoint: str  # status.endpoint: the controller's gRPC address
    token: str  # `token` of the Secret named in status.credential
    ca: str = ""  # base64 of the PEM CA bundle; "" trusts the system's roots


@dataclass(frozen=True)
class InstanceContext:
    """Everything a provisioner needs to render the objects of one instance."""

    namespace: str
    exporter: str
    exporter_uid: str
    labels: Mapping[str, str]
    set_name: str
    parameters: Mapping[str, Any]
    images: Mapping[str, Image]  # role ("exporter", "runtime") -> resolved image
    recycle: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    drivers: list[Any] = field(default_factory=list)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: list[Any] = field(default_factory=list)
    resources: Mapping[str, Any] = field(default_factory=dict)
    credentials_secret: str | None = None  # the class's credentialsSecretRef
    credentials: Credentials | None = None
    # the instance's objects on its target cluster by name, as read there
    # (`Provisioner.remote`): where its Services are reached
    target_objects: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def config_secret(self) -> str:
        return config_secret_name(self.exporter)

    def owner_reference(self) -> Obj:
        """The controller reference every object of the instance carries: its Exporter."""
        exporter = {"metadata": {"name": self.exporter, "uid": self.exporter_uid}}
        return controller_ref(exporter, EXPORTERS.api_version, EXPORTERS.kind)

    def pod_labels(self) -> dict[str, str]:
        """The Exporter's labels (the template's), the set named as Jumpstarter names it."""
        own = {k: v for k, v in self.labels.items() if k != SET_LABEL}
        return {**own, NAME_LABEL: self.set_name}

    def secret_labels(self) -> dict[str, str]:
        """Exactly Jumpstarter's label of a config Secret."""
        return {NAME_LABEL: self.set_name}

    def provisioned_labels(self) -> dict[str, str]:
        """The labels each object of a provisioner's own resources (`Provisioner.watches`)
        carries: the set's, as on its Pod and Secrets, and the instance's."""
        return {NAME_LABEL: self.set_name, INSTANCE_LABEL: self.exporter}


def _get(obj: Mapping[str, Any] | None, *path: str) -> Any:
    node: Any = obj
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def controller_ref(owner: Mapping[str, Any], api_version: str, kind: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": _get(owner, "metadata", "name"),
        "uid": _get(owner, "metadata", "uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def render_exporter(exporter_set: Mapping[str, Any], prefix: str) -> Obj:
    """An Exporter named `generateName: prefix`: template labels plus the set label,
    template annotations, controller ownerReference to the set."""
    meta = exporter_set.get("metadata") or {}
    labels = _get(exporter_set, "spec", "template", "metadata", "labels") or {}
    annotations = _get(exporter_set, "spec", "template", "metadata", "annotations") or {}
    metadata: Obj = {
        "generateName": prefix,
        "namespace": meta.get("namespace"),
        "labels": instance_labels(meta.get("name", ""), labels),
        "ownerReferences": [
            controller_ref(exporter_set, EXPORTERSETS.api_version, EXPORTERSETS.kind)
        ],
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": EXPORTERS.api_version,
        "kind": EXPORTERS.kind,
        "metadata": metadata,
        "spec": {"enabled": True},
    }


def resolve_image(
    role: str, exporter_set: Mapping[str, Any], klass: Mapping[str, Any], default: Image
) -> Image:
    """Set over class over the provisioner default, field by field."""
    chosen = default
    for source in (klass, exporter_set):
        node = _get(source, "spec", "images", role) or {}
        if node.get("image"):
            chosen = Image(node["image"], node.get("imagePullPolicy") or chosen.pull_policy)
        elif node.get("imagePullPolicy"):
            chosen = Image(chosen.image, node["imagePullPolicy"])
    return chosen


def merged_parameters(exporter_set: Mapping[str, Any], klass: Mapping[str, Any]) -> Obj:
    return deep_merge(_get(klass, "spec", "parameters"), _get(exporter_set, "spec", "parameters"))


def instance_context(
    exporter_set: Mapping[str, Any],
    klass: Mapping[str, Any],
    exporter: Mapping[str, Any],
    default_images: Mapping[str, Image],
    credentials: Credentials | None = None,
) -> InstanceContext:
    scheduling = _get(klass, "spec", "scheduling") or {}
    secret = _get(klass, "spec", "credentialsSecretRef", "name") or None
    set_defaults = spec_defaults("ExporterSet")
    return InstanceContext(
        namespace=_get(exporter, "metadata", "namespace"),
        exporter=_get(exporter, "metadata", "name"),
        exporter_uid=_get(exporter, "metadata", "uid") or "",
        labels=dict(_get(exporter, "metadata", "labels") or {}),
        set_name=_get(exporter_set, "metadata", "name") or "",
        annotations=dict(_get(exporter, "metadata", "annotations") or {}),
        parameters=merged_parameters(exporter_set, klass),
        images={
            role: resolve_image(role, exporter_set, klass, image)
            for role, image in default_images.items()
        },
        recycle=_get(exporter_set, "spec", "recycleStrategy") or set_defaults["recycleStrategy"],
        drivers=list(_get(exporter_set, "spec", "template", "spec", "drivers") or []),
        node_selector=dict(scheduling.get("nodeSelector") or {}),
        tolerations=list(scheduling.get("tolerations") or []),
        resources=dict(scheduling.get("resources") or {}),
        credentials_secret=secret,
        credentials=credentials,
    )


def export_map(drivers: Sequence[Mapping[str, Any]]) -> Obj:
    """The template's driver list as an ExporterConfig `export` map, by driver name: a
    `ref` driver becomes `{ref}`, any other `{type, config}`."""
    exported: Obj = {}
    for driver in drivers:
        name = str(driver.get("name", ""))
        if driver.get("ref"):
            exported[name] = {"ref": driver["ref"]}
        else:
            exported[name] = {
                "type": driver.get("type"),
                "config": dict(driver.get("config") or {}),
            }
    return exported


def exporter_config(ctx: InstanceContext, drivers: Sequence[Mapping[str, Any]]) -> Obj:
    """The instance's Jumpstarter ExporterConfig (what `jmp run --exporter-config` loads).

    `exitOnLeaseEnd` is what Jumpstarter's exporter-set controller writes: the exporter
    exits after a lease unless the pool reuses instances in place. Release 0.9.0's
    ExporterConfig model does not read it (it ignores unknown keys); the pool replaces a
    served instance itself either way (`pool.rules.buckets`, released)."""
    if ctx.credentials is None:
        raise ValueError(f"{ctx.namespace}/{ctx.exporter} has no credentials yet")
    return {
        "apiVersion": EXPORTER_CONFIG_API_VERSION,
        "kind": EXPORTER_CONFIG_KIND,
        "metadata": {"name": ctx.exporter, "namespace": ctx.namespace},
        "endpoint": ctx.credentials.endpoint,
        "token": ctx.credentials.token,
        "tls": {"ca": ctx.credentials.ca},
        "export": export_map(drivers),
        "exitOnLeaseEnd": ctx.recycle != RecycleStrategy.IN_PLACE_REUSE,
    }


# libyaml's emitter (PyYAML's wheels carry it): the pure-Python one costs about 5 ms per
# config, on every pass of every instance.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def render_config_secret(ctx: InstanceContext, drivers: Sequence[Mapping[str, Any]]) -> Obj:
    """The config Secret of an instance whose drivers are `drivers`."""
    return config_secret(ctx, exporter_config(ctx, drivers))


def config_text(config: Mapping[str, Any]) -> str:
    """`config.yaml` as the config Secret holds it."""
    return yaml.dump(dict(config), Dumper=_DUMPER, sort_keys=False, width=1 << 16)


def config_secret(ctx: InstanceContext, config: Mapping[str, Any]) -> Obj:
    """The config Secret `exporter-config-<exporter>`, key `config.yaml` holding `config`,
    owned by the Exporter. `data` is written base64 as the apiserver stores it, so the
    reconciler can compare what it would write with what its cache holds, byte for byte."""
    text = config_text(config)
    return {
        "apiVersion": SECRETS.api_version,
        "kind": SECRETS.kind,
        "metadata": {
            "name": ctx.config_secret,
            "namespace": ctx.namespace,
            "labels": ctx.secret_labels(),
            "ownerReferences": [ctx.owner_reference()],
        },
        "type": "Opaque",
        "data": {CONFIG_KEY: base64.b64encode(text.encode()).decode()},
    }
