"""The Exporter of one instance, and the inputs a provisioner renders its workload from.

Pure: the set and class arrive as raw dicts, the result is a dict to POST. The parts
every provisioner shares live here (name, labels, ownerReference, images resolved set >
class > provisioner default, scheduling, CA bundle, credentials); what the workload looks
like is the provisioner's (`reconciler.provisioners`). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from api.merge import deep_merge
from reconciler.access import EXPORTERS, EXPORTERSETS
from reconciler.defaults import field_default, spec_defaults
from reconciler.planner import instance_labels

__all__ = [
    "Image",
    "InstanceContext",
    "controller_ref",
    "instance_context",
    "merged_parameters",
    "render_exporter",
    "resolve_image",
]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Image:
    image: str
    pull_policy: str | None = None


@dataclass(frozen=True)
class InstanceContext:
    """Everything a provisioner needs to render the workload of one instance."""

    namespace: str
    exporter: str
    exporter_uid: str
    labels: Mapping[str, str]
    parameters: Mapping[str, Any]
    images: Mapping[str, Image]  # role ("exporter", "runtime") -> resolved image
    recycle: str
    drivers: list[Any] = field(default_factory=list)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: list[Any] = field(default_factory=list)
    resources: Mapping[str, Any] = field(default_factory=dict)
    ca_bundle: tuple[str, str] | None = None  # (ConfigMap name, key)
    credentials_secret: str | None = None


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


def render_exporter(exporter_set: Mapping[str, Any], name: str) -> Obj:
    """Exporter `name`: template labels plus the set label, template annotations,
    controller ownerReference to the set."""
    meta = exporter_set.get("metadata") or {}
    labels = _get(exporter_set, "spec", "template", "metadata", "labels") or {}
    annotations = _get(exporter_set, "spec", "template", "metadata", "annotations") or {}
    metadata: Obj = {
        "name": name,
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
) -> InstanceContext:
    scheduling = _get(klass, "spec", "scheduling") or {}
    ca = _get(klass, "spec", "caBundleConfigMapRef")
    ca_key = None
    if isinstance(ca, Mapping) and ca.get("name"):
        ca_key = (
            ca["name"],
            ca.get("key") or field_default("VirtualTargetClass", "spec.caBundleConfigMapRef.key"),
        )
    secret = _get(klass, "spec", "credentialsSecretRef", "name") or None
    set_defaults = spec_defaults("ExporterSet")
    return InstanceContext(
        namespace=_get(exporter, "metadata", "namespace"),
        exporter=_get(exporter, "metadata", "name"),
        exporter_uid=_get(exporter, "metadata", "uid") or "",
        labels=dict(_get(exporter, "metadata", "labels") or {}),
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
        ca_bundle=ca_key,
        credentials_secret=secret,
    )
