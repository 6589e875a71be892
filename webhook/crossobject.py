"""Checks that need other objects: an ExporterSet against its class and the other sets of
its namespace, a class against the sets that use it, a set's deletion against its leased
instances. Only the webhook and the reconciler can make these; the CRD cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError
from api.imagepolicy import ImagePolicy
from api.merge import deep_merge
from api.warmbuffer import AUTO, WARM_BUFFER
from pool.model.adapt import pool_claim
from pool.rendering.provisioners import Provisioner, known
from webhook.checks_images import inherited_image_findings
from webhook.clusterview import ClusterUnavailable, ClusterView
from webhook.jsontext import compact_json
from webhook.pools import leased_instances, overlapping, storable_errors
from webhook.verdict import Verdict

__all__ = [
    "check_class_change",
    "check_class_delete",
    "check_set_against_class",
    "check_set_delete",
    "check_set_overlap",
]

_NAMED = 5  # leased instances named one by one in a deletion's warnings


async def check_set_against_class(
    exporter_set: Mapping[str, Any],
    namespace: str,
    view: ClusterView,
    budget: float,
    image_policy: ImagePolicy | None = None,
    old: Mapping[str, Any] | None = None,
) -> Verdict:
    """The set's class exists, agrees with the warm buffer, and its provisioner accepts
    the merged parameters and the set (`Provisioner.set_findings`: for QEMU, its images
    can run the layout they name); the set's own unknown parameter keys are warnings.
    With an image allow-list, the images the set leaves to its class must be on it
    (`old`: the set before an UPDATE)."""
    set_spec = _mapping(exporter_set.get("spec"))
    name = set_spec.get("virtualTargetClassName")
    if not isinstance(name, str) or not name:
        return Verdict()
    found = await view.get_class(namespace, name, budget)
    if found is None:
        return Verdict(
            warnings=[
                f'VirtualTargetClass "{name}" not found in namespace "{namespace}"; '
                "no instances are created until it exists"
            ]
        )
    class_spec = _mapping(found.get("spec"))
    verdict = _warm_findings(exporter_set, name, class_spec)
    provisioner = class_spec.get("provisioner")
    plugin = known(provisioner)  # one this product does not know: its controller checks
    if isinstance(provisioner, str):
        errors: tuple[FieldError, ...] = ()
        if plugin is not None:
            errors, warnings = _set_parameter_findings(
                plugin, found, class_spec.get("parameters"), set_spec.get("parameters")
            )
            verdict.errors += errors
            verdict.warnings += warnings
            merged = deep_merge(
                _mapping(class_spec.get("parameters")), _mapping(set_spec.get("parameters"))
            )
            set_errors, set_warnings = plugin.set_findings(set_spec, class_spec, merged)
            verdict.errors += set_errors
            verdict.warnings += set_warnings
        if not errors:  # what an instance would be: the apiserver must be able to store it
            verdict.errors += storable_errors(exporter_set, found)
    if image_policy is not None:
        defaults = (
            {role: image.image for role, image in plugin.default_images.items()}
            if plugin is not None
            else {}
        )
        verdict.extend(
            inherited_image_findings(image_policy, exporter_set, old, name, found, defaults)
        )
    return verdict


def _warm_findings(
    exporter_set: Mapping[str, Any], name: str, class_spec: Mapping[str, Any]
) -> Verdict:
    """A WaitForFirstConsumer class creates instances for pending Leases only: a warm
    buffer on its set is an error, `warm-buffer: auto` a warning (it asks for nothing the
    pool could keep, and the reconciler sizes no buffer for it)."""
    verdict = Verdict()
    if class_spec.get("bindingMode") != "WaitForFirstConsumer":
        return verdict
    warm = _mapping(exporter_set.get("spec")).get("minAvailableReplicas")
    if isinstance(warm, int) and warm > 0:
        verdict.errors.append(
            FieldError.invalid(
                "spec.minAvailableReplicas",
                warm,
                f'must be 0: VirtualTargetClass "{name}" has bindingMode WaitForFirstConsumer, '
                "which keeps no warm instances",
            )
        )
    annotations = _mapping(_mapping(exporter_set.get("metadata")).get("annotations"))
    if annotations.get(WARM_BUFFER) == AUTO:
        verdict.warnings.append(
            f'{WARM_BUFFER}: {AUTO} has no effect: class "{name}" binds WaitForFirstConsumer, '
            "keeps none warm"
        )
    return verdict


Findings = tuple[tuple[FieldError, ...], tuple[str, ...]]


def _set_parameter_findings(
    plugin: Provisioner, found: Mapping[str, Any], class_parameters: Any, set_parameters: Any
) -> Findings:
    """Errors of the merged parameters, and warnings for the unknown keys the set itself
    adds (the class's own were reported when the class was admitted), remembered per
    class version and set parameters.

    A class read from the cluster names its version (uid and resourceVersion), and a
    pool's set is admitted again and again with the same parameters: the merge and the
    model's Python validators then run once per class version and parameter text.
    """

    def check() -> Findings:
        own = _mapping(set_parameters)
        merged = deep_merge(_mapping(class_parameters), own)
        return (
            plugin.check_parameters(merged, merged=True).errors,
            tuple(plugin.check_parameters(own).warnings),
        )

    metadata = _mapping(found.get("metadata"))
    uid, version = metadata.get("uid"), metadata.get("resourceVersion")
    if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
        return check()  # a class from files: no version to remember it by
    try:
        key = (uid, version, plugin.name, compact_json(set_parameters))
    except (TypeError, ValueError):  # values JSON cannot spell
        return check()
    findings = _CHECKED_PARAMETERS.get(key)
    if findings is None:
        if len(_CHECKED_PARAMETERS) >= _CHECKED_PARAMETERS_MAX:
            _CHECKED_PARAMETERS.clear()
        findings = _CHECKED_PARAMETERS[key] = check()
    return findings


_CHECKED_PARAMETERS: dict[tuple[str, str, str, str], Findings] = {}
_CHECKED_PARAMETERS_MAX = 1024


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


async def check_class_delete(
    namespace: str, name: str, view: ClusterView, budget: float
) -> Verdict:
    """A class that ExporterSets still use may not be deleted; name them."""
    users = await view.sets_using_class(namespace, name, budget)
    if not users:
        return Verdict()
    shown = ", ".join(users[:10]) + (f" and {len(users) - 10} more" if len(users) > 10 else "")
    return Verdict(
        [
            FieldError.forbidden(
                "metadata.name",
                f"VirtualTargetClass is in use by ExporterSets {shown}; delete or move them first",
            )
        ]
    )


async def check_set_overlap(
    exporter_set: Mapping[str, Any], namespace: str, view: ClusterView, budget: float
) -> Verdict:
    """A warning for each set of the namespace whose instances a Lease for this one may
    match too, naming the set that counts such a Lease (`pool.rules.claims`)."""
    me = pool_claim(exporter_set)
    others = await view.overlapping_sets(namespace, me, budget)
    return Verdict(
        warnings=[
            f'selector overlaps ExporterSet "{other}": a pending Lease both match is counted '
            f'by the older set, "{counts}"'
            for other, counts in overlapping(me, others)
        ]
    )


async def check_class_change(
    klass: Mapping[str, Any], namespace: str, view: ClusterView, budget: float
) -> Verdict:
    """A class created or changed must leave every set that uses it storable. A class
    review needs no cluster read otherwise: while the sets cannot be read, it is admitted
    with a warning (a pool pushed over still says so in its status: WriteRejected)."""
    name = _mapping(klass.get("metadata")).get("name")
    try:
        found = await view.sets_of(namespace, budget)
    except ClusterUnavailable as exc:
        return Verdict(warnings=[f"sets using the class not checked: {exc}"])
    sets = [
        s
        for s in found
        if _mapping(s.get("spec")).get("virtualTargetClassName") == name
        and not _mapping(s.get("metadata")).get("deletionTimestamp")
    ]
    verdict = Verdict()
    for exporter_set in sets:
        who = str(_mapping(exporter_set.get("metadata")).get("name", ""))
        verdict.errors += storable_errors(exporter_set, klass, who=who)
    return verdict


async def check_set_delete(
    exporter_set: Mapping[str, Any] | None,
    namespace: str,
    name: str,
    view: ClusterView,
    budget: float,
) -> Verdict:
    """Warnings naming the instances of a set being deleted that serve a lease: each stays
    until its lease ends (`pool.rules.protection`). Never a denial."""
    try:
        exporters, leases = await view.pool_instances(namespace, name, budget)
    except ClusterUnavailable as exc:
        return Verdict(warnings=[f"leased instances not checked: {exc}"])
    leased = leased_instances(exporter_set or {}, exporters, leases)
    warnings = [
        f"instance {instance} serves {what}: it stays until that ends, then goes"
        for instance, what in leased[:_NAMED]
    ]
    if len(leased) > _NAMED:
        warnings.append(f"and {len(leased) - _NAMED} more leased instance(s), each kept as well")
    return Verdict(warnings=warnings)
