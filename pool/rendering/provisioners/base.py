"""The provisioner plug-in interface: everything that belongs to one provisioner.

A provisioner states its name (the value of a class's `provisioner`) and its default
images, checks the parameters a class and a set give it, says what admission finds of a
class or set beyond its parameters (for QEMU: images that cannot run the layout or boot
the firmware named), and turns one instance (its Exporter and an `InstanceContext`) into
what runs it. The parts every provisioner shares (the Exporter, the config Secret around
the drivers) are `pool.rendering.render`'s. For the reconcile loop it names the resources
its instances are made of beyond those (`watches`: cached, woken from and observed by
instance), and what of them goes when an instance is removed (`cleanup`). One whose
instances also live on another cluster (KubeVirt's VirtualMachines) says how in `remote`
(`Remote`): which cluster and namespace, what to create there, and when an object there
has failed. Admission
(`webhook/`) and the reconcile loop (`reconciler/`) reach a provisioner only through
this interface and the registry in `pool.rendering.provisioners`. Pure: it returns
dicts, findings and references, it never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from api.fielderrors import FieldError
from api.provisioners.check import ParameterCheck
from pool.model.access import Resource
from pool.model.views import ProvisionedView
from pool.rendering.render import Image, InstanceContext, merged_parameters

__all__ = ["Findings", "Provisioner", "Remote", "TargetRef", "target_of"]

# (errors, warnings) of an admission check
Findings = tuple[list[FieldError], list[str]]


@dataclass(frozen=True, slots=True)
class TargetRef:
    """Where a set's instances live beyond this cluster: the cluster reached with the
    kubeconfig in key `key` of the Secret `secret` (in the set's namespace), and the
    namespace there."""

    secret: str
    key: str
    namespace: str


class Remote(Protocol):
    """The part of a provisioner whose instances are also objects on a target cluster.
    The runtime (`reconciler.runtime.targets`) reaches that cluster, creates what
    `objects` renders before the instance's Pod, lists and watches `resources` there
    (those labelled with `labels`' keys), observes each as a `ProvisionedView`, and
    deletes them as `Provisioner.cleanup` says."""

    # The resources of its objects there, the first the one every instance must have.
    resources: tuple[Resource, ...]

    def target(
        self, credentials_secret: str | None, parameters: Mapping[str, Any]
    ) -> TargetRef | None:
        """The target of a set: its class's credentials Secret and its merged
        parameters; None where they do not say (admission refuses such sets)."""
        ...

    def objects(
        self, ctx: InstanceContext, extra_labels: Mapping[str, str], owner_uid: str = ""
    ) -> list[dict[str, Any]]:
        """The instance's objects there, each with `extra_labels` beside its own: without
        `owner_uid`, the one created first (the first of `resources`); with it (that
        object's uid), the rest, which it owns."""
        ...

    def failure(self, obj: Mapping[str, Any]) -> str:
        """Why an object there can serve no lease ("" while it can): what makes its
        instance failed, replaced as a failed Pod's is."""
        ...


class Provisioner(Protocol):
    name: str
    default_images: Mapping[str, Image]
    # Its instances' objects on a target cluster (None: they are this cluster's only).
    remote: Remote | None
    # The resources its instances are made of beyond the Exporter, Pod and Secrets, each
    # object in the set's namespace with `InstanceContext.provisioned_labels`: the
    # reconcile loop caches them, wakes their set on their events and observes them by
    # instance (`Observation.provisioned`); the access table grants list, watch and
    # delete of them (`pool.model.access.provisioned_access`). QEMU: none.
    watches: tuple[Resource, ...]

    def check_parameters(
        self, parameters: Mapping[str, Any], *, merged: bool = False
    ) -> ParameterCheck:
        """Errors and warnings of `parameters`: a class's own, or (`merged`) a set's
        deep-merged over its class's. A set whose merged parameters have errors is not
        scaled; admission refuses them."""
        ...

    def class_findings(self, class_spec: Mapping[str, Any]) -> Findings:
        """What admission finds of a class beyond its parameters."""
        ...

    def set_findings(
        self,
        set_spec: Mapping[str, Any],
        class_spec: Mapping[str, Any],
        merged: Mapping[str, Any],
    ) -> Findings:
        """What admission finds of a set against its class, `merged` its parameters
        deep-merged over the class's."""
        ...

    def drivers(self, ctx: InstanceContext) -> list[dict[str, Any]]:
        """The template's drivers as this provisioner runs them (the config's `export`)."""
        ...

    def render_pod(self, ctx: InstanceContext) -> dict[str, Any]:
        """The Pod of one instance (name, labels and ownerReference included)."""
        ...

    def cleanup(
        self, instance: str, provisioned: Sequence[ProvisionedView]
    ) -> tuple[ProvisionedView, ...]:
        """What to delete when the instance (its Exporter's name) is removed, given its
        objects of `watches` as the pass observed them: the removal deletes each, by uid
        where one is given, before the Exporter. Nothing for what the Exporter owns: the
        garbage collector follows ownerReferences."""
        ...


def target_of(
    remote: Remote, exporter_set: Mapping[str, Any], klass: Mapping[str, Any] | None
) -> TargetRef | None:
    """A set's target: from its class's credentials Secret and its merged parameters."""
    if klass is None:
        return None
    reference = (klass.get("spec") or {}).get("credentialsSecretRef")
    secret = reference.get("name") if isinstance(reference, Mapping) else None
    return remote.target(secret, merged_parameters(exporter_set, klass))
