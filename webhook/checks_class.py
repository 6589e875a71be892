"""VirtualTargetClass checks the CRD's CEL cannot express: provisioner name, references,
toleration effects, nodeSelector label syntax, resource quantities, images, the
provisioner's parameters (the class's own; a set's are checked merged over them) and what
else the provisioner finds of it (`Provisioner.class_findings`; for QEMU a runtime image
its layout does not run, a firmware or architecture its exporter image cannot boot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError, join_path
from api.labels import dns_subdomain_errors, labels_errors, qualified_name_errors
from pool.rendering.provisioners import known
from webhook.checks_common import child, images_errors, resources_errors
from webhook.verdict import Verdict

__all__ = ["TAINT_EFFECTS", "TOLERATION_OPERATORS", "check_class"]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Exists", "Equal")


def check_class(obj: Mapping[str, Any]) -> Verdict:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return Verdict([FieldError.required("spec")])
    verdict = Verdict()
    provisioner = spec.get("provisioner")
    verdict.errors += _provisioner_errors(provisioner)
    parameters = spec.get("parameters")
    plugin = known(provisioner)  # one this product does not know: its controller checks
    if plugin is not None and isinstance(parameters, dict):
        found = plugin.check_parameters(parameters)
        verdict.errors += found.errors
        verdict.warnings += found.warnings
    if plugin is not None:
        class_errors, class_warnings = plugin.class_findings(spec)
        verdict.errors += class_errors
        verdict.warnings += class_warnings
    verdict.errors += _reference_errors(
        spec.get("caBundleConfigMapRef"), "spec.caBundleConfigMapRef"
    )
    verdict.errors += images_errors(spec.get("images"), "spec.images")
    scheduling = spec.get("scheduling")
    node_selector = child(scheduling, "nodeSelector")
    if node_selector is not None:
        verdict.errors += labels_errors(node_selector, "spec.scheduling.nodeSelector")
    verdict.errors += resources_errors(child(scheduling, "resources"), "spec.scheduling.resources")
    tolerations = child(scheduling, "tolerations")
    if isinstance(tolerations, list):
        for index, toleration in enumerate(tolerations):
            if isinstance(toleration, dict):
                verdict.extend(_toleration(toleration, f"spec.scheduling.tolerations[{index}]"))
    return verdict


def _provisioner_errors(provisioner: Any) -> list[FieldError]:
    field = "spec.provisioner"
    if provisioner == "":  # absent: the schema's `required` reports it
        return [FieldError.required(field, "e.g. qemu.jumpstarter.dev")]
    if not isinstance(provisioner, str):
        return []
    return [FieldError.invalid(field, provisioner, r) for r in qualified_name_errors(provisioner)]


def _reference_errors(reference: Any, path: str) -> list[FieldError]:
    if not isinstance(reference, dict):
        return []
    name = reference.get("name")
    field = join_path(path, "name")
    if name is None or name == "":
        return [FieldError.required(field, "the reference must name its ConfigMap")]
    if isinstance(name, str):
        return [FieldError.invalid(field, name, r) for r in dns_subdomain_errors(name)]
    return []


def _toleration(toleration: Mapping[str, Any], path: str) -> Verdict:
    # `Exists` without value and empty key with `Exists` are rules in api/rules.py.
    verdict = Verdict()
    operator = toleration.get("operator")
    if operator not in (None, "", *TOLERATION_OPERATORS):
        verdict.errors.append(
            FieldError.not_supported(
                join_path(path, "operator"), operator, list(TOLERATION_OPERATORS)
            )
        )
    effect = toleration.get("effect")
    if effect not in (None, "", *TAINT_EFFECTS):
        verdict.errors.append(
            FieldError.not_supported(join_path(path, "effect"), effect, list(TAINT_EFFECTS))
        )
    key = toleration.get("key")
    if isinstance(key, str) and key:
        verdict.errors += [
            FieldError.invalid(join_path(path, "key"), key, r) for r in qualified_name_errors(key)
        ]
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        verdict.warnings.append(f"{path}.tolerationSeconds is ignored unless effect is NoExecute")
    return verdict
