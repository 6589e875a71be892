"""The one table of single-object rules.

Each rule is written once and used twice: the CRD generator attaches `cel` as an
`x-kubernetes-validations` entry on the schema node at `scope`, and the admission
webhook runs `check` on the same node. A differential test evaluates both on
generated objects and requires them to agree.

Conventions:
- `scope` is a dotted schema path inside the object (`spec`, `spec.scheduling.tolerations[]`);
  `[]` means "each item of the list", and the rule is evaluated per item.
- `cel` sees the node at `scope` as `self`; it must be true for a valid object. It
  guards optional fields with `has()` so that it is defined on every object.
- `check(node, path)` receives the same node (a plain dict) and its absolute field path
  (`spec`, `spec.scheduling.tolerations[2]`) and returns every error it finds; it must
  return no error exactly when `cel` is true.
- `field` is the failing field relative to `scope` (the CEL `fieldPath`), or "" for the
  node itself.

No I/O here, and no import of `kubernetes` or `fastapi`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from api.fielderrors import ErrorType, FieldError, join_path
from api.labels import DNS_SUBDOMAIN_MAX, DNS_SUBDOMAIN_PATTERN, dns_subdomain_errors

__all__ = ["GO_DURATION_PATTERN", "RULES", "Rule", "rules_for"]

Node = Mapping[str, Any]
Check = Callable[[Node, str], list[FieldError]]

# A non-negative Go duration as time.ParseDuration reads it ("300s", "5m", "1h30m", "0").
GO_DURATION_PATTERN = "^(0|(([0-9]+([.][0-9]+)?|[.][0-9]+)(ns|us|µs|ms|s|m|h))+)$"


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str
    scope: str
    cel: str
    message: str
    check: Check
    field: str = ""
    error_type: ErrorType = ErrorType.INVALID
    # What in kube-apiserver already refuses this, in its own words (`message`): the CRD
    # then carries no CEL for it, so a wrong field gets one message, not two.
    apiserver_check: str = ""

    @property
    def field_path(self) -> str:
        """The CEL `fieldPath` (`.minReplicas`), or "" when the rule is about the node."""
        return f".{self.field}" if self.field else ""


def _count_at_most_max(name: str) -> Check:
    def check(node: Node, path: str) -> list[FieldError]:
        value, ceiling = node.get(name), node.get("maxReplicas")
        if isinstance(value, int) and isinstance(ceiling, int) and ceiling != 0 and value > ceiling:
            return [
                FieldError.invalid(
                    join_path(path, name),
                    value,
                    f"must be less than or equal to {join_path(path, 'maxReplicas')} ({ceiling})",
                )
            ]
        return []

    return check


def _non_negative(name: str, text: str = "must be greater than or equal to 0") -> Check:
    def check(node: Node, path: str) -> list[FieldError]:
        value = node.get(name)
        if isinstance(value, int) and value < 0:
            return [FieldError.invalid(join_path(path, name), value, text)]
        return []

    return check


def _unique_driver_names(node: Node, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, driver in enumerate(node.get("drivers") or []):
        name = driver.get("name") if isinstance(driver, Mapping) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            errors.append(FieldError.duplicate(f"{join_path(path, 'drivers')}[{index}].name", name))
        seen.add(name)
    return errors


def _driver_type_xor_ref(node: Node, path: str) -> list[FieldError]:
    if ("type" in node) == ("ref" in node):
        return [
            FieldError.invalid(path, _driver_label(node), "must set exactly one of type and ref")
        ]
    return []


def _driver_no_config_with_ref(node: Node, path: str) -> list[FieldError]:
    if "ref" in node and "config" in node:
        return [FieldError.forbidden(join_path(path, "config"), "may not be set together with ref")]
    return []


def _driver_label(node: Node) -> Any:
    return {k: node[k] for k in ("name", "type", "ref") if k in node}


def _exists_has_no_value(node: Node, path: str) -> list[FieldError]:
    if node.get("operator") == "Exists" and node.get("value", "") != "":
        return [
            FieldError.invalid(
                join_path(path, "value"),
                node["value"],
                "must be empty when operator is Exists",
            )
        ]
    return []


def _empty_key_needs_exists(node: Node, path: str) -> list[FieldError]:
    if node.get("key", "") == "" and node.get("operator", "Equal") != "Exists":
        return [
            FieldError.invalid(
                join_path(path, "operator"),
                node.get("operator", "Equal"),
                "must be Exists when key is empty (a toleration that matches every taint)",
            )
        ]
    return []


def _go_duration(name: str) -> Check:
    def check(node: Node, path: str) -> list[FieldError]:
        value = node.get(name)
        if isinstance(value, str) and not re.fullmatch(GO_DURATION_PATTERN, value):
            return [
                FieldError.invalid(
                    join_path(path, name),
                    value,
                    "must be a non-negative Go duration such as 300s, 5m or 1h30m",
                )
            ]
        return []

    return check


def _class_name_is_an_object_name(node: Node, path: str) -> list[FieldError]:
    name = node.get("virtualTargetClassName")
    if not isinstance(name, str):
        return []
    field = join_path(path, "virtualTargetClassName")
    if name == "":
        return [FieldError.invalid(field, name, "must name a VirtualTargetClass")]
    return [FieldError.invalid(field, name, reason) for reason in dns_subdomain_errors(name)]


def _selector_matches_template(node: Node, path: str) -> list[FieldError]:
    selector = node.get("selector") or {}
    wanted = selector.get("matchLabels") or {} if isinstance(selector, Mapping) else {}
    template = node.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    errors: list[FieldError] = []
    for key, value in wanted.items():
        if labels.get(key) != value:
            errors.append(
                FieldError.invalid(
                    join_path(path, "template.metadata.labels"),
                    labels,
                    f"must match spec.selector.matchLabels ({key}={value}); a pool whose "
                    "selector misses its template never sees its own instances",
                )
            )
            break
    return errors


# The scale subresource's specReplicasPath (schemas/overlay.yaml): kube-apiserver refuses
# a negative value there itself (`.spec.minReplicas: Invalid value: -1: should be a
# non-negative integer`), before and besides any CEL.
SCALE_CHECK_MESSAGE = "should be a non-negative integer"

RULES: tuple[Rule, ...] = (
    *(
        Rule(
            id=f"exporterset.{name}.non-negative",
            kind="ExporterSet",
            scope="spec",
            field=name,
            cel=f"!has(self.{name}) || self.{name} >= 0",
            message=f"{name} must be greater than or equal to 0" if not by else SCALE_CHECK_MESSAGE,
            check=_non_negative(name, SCALE_CHECK_MESSAGE) if by else _non_negative(name),
            apiserver_check=by,
        )
        for name, by in (
            ("minReplicas", "the scale subresource (specReplicasPath .spec.minReplicas)"),
            ("maxReplicas", ""),
            ("minAvailableReplicas", ""),
        )
    ),
    *(
        Rule(
            id=f"exporterset.{name}.at-most-max",
            kind="ExporterSet",
            scope="spec",
            field=name,
            cel=(
                f"!has(self.{name}) || !has(self.maxReplicas) || self.maxReplicas == 0 "
                f"|| self.{name} <= self.maxReplicas"
            ),
            message=f"{name} must be less than or equal to maxReplicas (0 means no ceiling)",
            check=_count_at_most_max(name),
        )
        for name in ("minReplicas", "minAvailableReplicas")
    ),
    Rule(
        id="exporterset.scaleDownCooldown.go-duration",
        kind="ExporterSet",
        scope="spec",
        field="scaleDownCooldown",
        cel=(
            "!has(self.scaleDownCooldown) || "
            f"self.scaleDownCooldown.matches('{GO_DURATION_PATTERN}')"
        ),
        message="scaleDownCooldown must be a non-negative Go duration such as 300s, 5m or 1h30m",
        check=_go_duration("scaleDownCooldown"),
    ),
    Rule(
        id="exporterset.virtualTargetClassName.object-name",
        kind="ExporterSet",
        scope="spec",
        field="virtualTargetClassName",
        cel=(
            "!has(self.virtualTargetClassName) || "
            f"(size(self.virtualTargetClassName) <= {DNS_SUBDOMAIN_MAX} && "
            f"self.virtualTargetClassName.matches('{DNS_SUBDOMAIN_PATTERN}'))"
        ),
        message=(
            "virtualTargetClassName must name a VirtualTargetClass: a lowercase RFC 1123 "
            f"subdomain of at most {DNS_SUBDOMAIN_MAX} characters"
        ),
        check=_class_name_is_an_object_name,
    ),
    Rule(
        id="exporterset.selector.matches-template",
        kind="ExporterSet",
        scope="spec",
        field="template.metadata.labels",
        cel=(
            "!has(self.selector) || !has(self.selector.matchLabels) || "
            "self.selector.matchLabels.all(k, has(self.template) && has(self.template.metadata) "
            "&& has(self.template.metadata.labels) && k in self.template.metadata.labels "
            "&& self.template.metadata.labels[k] == self.selector.matchLabels[k])"
        ),
        message="template.metadata.labels must match selector.matchLabels",
        check=_selector_matches_template,
    ),
    Rule(
        id="exporterset.drivers.unique-names",
        kind="ExporterSet",
        scope="spec.template.spec",
        field="drivers",
        cel=(
            # filter() first: cel-python does not short-circuit `!has(d.name) || …` here.
            "!has(self.drivers) || self.drivers.filter(d, has(d.name)).all(d, "
            "self.drivers.exists_one(e, has(e.name) && e.name == d.name))"
        ),
        message="driver names must be unique",
        check=_unique_driver_names,
        # Not DUPLICATE: kube-apiserver drops a CEL rule's message for FieldValueDuplicate,
        # and "Duplicate value" alone does not say which rule failed.
        error_type=ErrorType.INVALID,
    ),
    Rule(
        id="exporterset.driver.type-xor-ref",
        kind="ExporterSet",
        scope="spec.template.spec.drivers[]",
        cel="has(self.type) != has(self.ref)",
        message="a driver must set exactly one of type and ref",
        check=_driver_type_xor_ref,
    ),
    Rule(
        id="exporterset.driver.no-config-with-ref",
        kind="ExporterSet",
        scope="spec.template.spec.drivers[]",
        field="config",
        cel="!(has(self.ref) && has(self.config))",
        message="config may not be set together with ref",
        check=_driver_no_config_with_ref,
        error_type=ErrorType.FORBIDDEN,
    ),
    Rule(
        id="virtualtargetclass.toleration.exists-has-no-value",
        kind="VirtualTargetClass",
        scope="spec.scheduling.tolerations[]",
        field="value",
        cel=(
            "!has(self.operator) || self.operator != 'Exists' || !has(self.value) "
            "|| self.value == ''"
        ),
        message="value must be empty when operator is Exists",
        check=_exists_has_no_value,
    ),
    Rule(
        id="virtualtargetclass.toleration.empty-key-needs-exists",
        kind="VirtualTargetClass",
        scope="spec.scheduling.tolerations[]",
        field="operator",
        cel=(
            "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')"
        ),
        message="operator must be Exists when key is empty",
        check=_empty_key_needs_exists,
    ),
)


def rules_for(kind: str) -> tuple[Rule, ...]:
    """The rules of one kind, in table order."""
    return tuple(rule for rule in RULES if rule.kind == kind)
