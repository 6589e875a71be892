"""Label syntax and label selectors, as k8s.io/apimachinery validates and matches them.

The webhook validates `selector`, `template.metadata.labels` and `nodeSelector` with
these functions; the reconciler matches its Exporters with `selector_matches` and
writes `status.selector` with `selector_string`. No I/O. Selectors and label maps are
decoded JSON or YAML: an object is a `dict` (checked as such, cheaper than `Mapping`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from api.fielderrors import FieldError, join_path

__all__ = [
    "DNS_SUBDOMAIN_MAX",
    "DNS_SUBDOMAIN_PATTERN",
    "SELECTOR_OPERATORS",
    "dns_subdomain_errors",
    "label_value_errors",
    "labels_errors",
    "qualified_name_errors",
    "selector_errors",
    "selector_matches",
    "selector_string",
]

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
# Without backslashes, so that a CEL string literal can carry it unchanged.
DNS_SUBDOMAIN_PATTERN = rf"^{_DNS_LABEL}([.]{_DNS_LABEL})*$"
DNS_SUBDOMAIN_MAX = 253
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
_NAME_MAX = 63
_PREFIX_MAX = DNS_SUBDOMAIN_MAX

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@lru_cache(maxsize=4096)  # names and labels repeat across reviews
def qualified_name_errors(value: str) -> tuple[str, ...]:
    """Why `value` is not a qualified name (`[prefix/]name`); empty when it is one."""
    parts = value.split("/")
    if len(parts) > 2:
        return ("a qualified name must consist of an optional DNS subdomain prefix and a name",)
    reasons: list[str] = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            reasons.append("prefix part must be non-empty")
        elif len(prefix) > _PREFIX_MAX or not _DNS_SUBDOMAIN.fullmatch(prefix):
            reasons.append(
                "prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters"
            )
    else:
        name = parts[0]
    if not name:
        reasons.append("name part must be non-empty")
    elif len(name) > _NAME_MAX:
        reasons.append("name part must be no more than 63 characters")
    elif not _NAME.fullmatch(name):
        reasons.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return tuple(reasons)


@lru_cache(maxsize=4096)  # names and labels repeat across reviews
def dns_subdomain_errors(value: str) -> tuple[str, ...]:
    """Why `value` is not an object name (a lowercase RFC 1123 subdomain); empty when it is."""
    if len(value) > _PREFIX_MAX:
        return ("must be no more than 253 characters",)
    if not _DNS_SUBDOMAIN.fullmatch(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character",
        )
    return ()


@lru_cache(maxsize=4096)  # names and labels repeat across reviews
def label_value_errors(value: str) -> tuple[str, ...]:
    """Why `value` is not a valid label value; empty when it is one."""
    if value == "":
        return ()
    if len(value) > _NAME_MAX:
        return ("must be no more than 63 characters",)
    if not _NAME.fullmatch(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character",
        )
    return ()


def labels_errors(labels: Any, path: str) -> list[FieldError]:
    """Every invalid key or value of a label map (also used for nodeSelector)."""
    if not isinstance(labels, dict):
        return [FieldError.invalid(path, labels, "must be a map of strings")]
    try:
        if _valid_label_items(tuple(labels.items())):
            return []
    except TypeError:  # an unhashable value (a list or map): reported below
        pass
    errors: list[FieldError] = []
    for key, value in labels.items():
        for reason in qualified_name_errors(key):
            errors.append(FieldError.invalid(path, key, reason))
        if not isinstance(value, str):
            errors.append(FieldError.invalid(join_path(path, key), value, "must be a string"))
            continue
        for reason in label_value_errors(value):
            errors.append(FieldError.invalid(join_path(path, key), value, reason))
    return errors


@lru_cache(maxsize=4096)  # a pool's label maps are the same on every admission of it
def _valid_label_items(items: tuple[tuple[Any, Any], ...]) -> bool:
    """Whether every key is a qualified name and every value a valid label value."""
    return all(
        isinstance(key, str)
        and isinstance(value, str)
        and not qualified_name_errors(key)
        and not label_value_errors(value)
        for key, value in items
    )


def selector_errors(selector: Any, path: str) -> list[FieldError]:
    """Every error of a metav1.LabelSelector, as ValidateLabelSelector reports them."""
    if not isinstance(selector, dict):
        return [FieldError.invalid(path, selector, "must be an object")]
    errors: list[FieldError] = []
    if "matchLabels" in selector:
        errors += labels_errors(selector["matchLabels"], join_path(path, "matchLabels"))
    expressions = selector.get("matchExpressions", [])
    if not isinstance(expressions, list):
        errors.append(
            FieldError.invalid(join_path(path, "matchExpressions"), expressions, "must be a list")
        )
        return errors
    for index, expression in enumerate(expressions):
        errors += _requirement_errors(expression, f"{path}.matchExpressions[{index}]")
    return errors


def _requirement_errors(expression: Any, path: str) -> list[FieldError]:
    if not isinstance(expression, dict):
        return [FieldError.invalid(path, expression, "must be an object")]
    errors: list[FieldError] = []
    key = expression.get("key")
    if not isinstance(key, str) or not key:
        errors.append(FieldError.required(join_path(path, "key")))
    else:
        errors += [
            FieldError.invalid(join_path(path, "key"), key, reason)
            for reason in qualified_name_errors(key)
        ]
    operator = expression.get("operator")
    values = expression.get("values") or []
    if operator not in SELECTOR_OPERATORS:
        errors.append(
            FieldError.not_supported(
                join_path(path, "operator"), operator, list(SELECTOR_OPERATORS)
            )
        )
    elif not isinstance(values, list):
        errors.append(FieldError.invalid(join_path(path, "values"), values, "must be a list"))
        return errors
    elif operator in ("In", "NotIn") and not values:
        errors.append(
            FieldError.required(
                join_path(path, "values"), "must be specified when `operator` is 'In' or 'NotIn'"
            )
        )
    elif operator in ("Exists", "DoesNotExist") and values:
        errors.append(
            FieldError.forbidden(
                join_path(path, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
        )
    for index, value in enumerate(values if isinstance(values, list) else []):
        field = f"{path}.values[{index}]"
        if not isinstance(value, str):
            errors.append(FieldError.invalid(field, value, "must be a string"))
            continue
        errors += [FieldError.invalid(field, value, reason) for reason in label_value_errors(value)]
    return errors


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy a well-formed selector (an empty selector matches all)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def selector_string(selector: Mapping[str, Any]) -> str:
    """The selector in `kubectl -l` syntax, as `status.selector` carries it for the HPA."""
    terms: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        terms.append((key, f"{key}={value}"))
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = ",".join(sorted(expression.get("values") or []))
        rendered = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }[operator]
        terms.append((key, rendered))
    return ",".join(text for _, text in sorted(terms))
