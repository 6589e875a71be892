"""Runs the shared rule table (`api.rules`) on an object: the webhook's half of each rule.

A rule's `scope` names the nodes its CEL is attached to in the CRD; this module finds the
same nodes in a raw object (each list item for `[]`) and calls the rule's `check` there.
A node that is absent or of the wrong type is skipped, as CEL is never evaluated on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from api.fielderrors import FieldError
from api.rules import Rule, rules_for

__all__ = ["nodes_at", "run_rules"]


def nodes_at(obj: Any, scope: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every object node at `scope` in `obj`, with its field path."""
    found: list[tuple[Any, str]] = [(obj, "")]
    for segment in scope.split("."):
        each = segment.endswith("[]")
        name = segment.removesuffix("[]")
        following: list[tuple[Any, str]] = []
        for node, path in found:
            if not _is_object(node) or name not in node:
                continue
            child, child_path = node[name], f"{path}.{name}" if path else name
            if each:
                if isinstance(child, list):
                    following += [(item, f"{child_path}[{i}]") for i, item in enumerate(child)]
            else:
                following.append((child, child_path))
        found = following
    for node, path in found:
        if _is_object(node):
            yield node, path


def _is_object(node: Any) -> bool:
    # Decoded JSON objects are dicts: test that first, the ABC check is much slower.
    return type(node) is dict or isinstance(node, Mapping)


@cache
def _rules(kind: str) -> tuple[Rule, ...]:
    return rules_for(kind)  # the table is immutable: filter it once per kind


def run_rules(kind: str, obj: Any, rules: tuple[Rule, ...] | None = None) -> list[FieldError]:
    """Every error the rule table finds in `obj`, in table order."""
    errors: list[FieldError] = []
    found: dict[str, list[tuple[Mapping[str, Any], str]]] = {}  # several rules share a scope
    for rule in _rules(kind) if rules is None else rules:
        nodes = found.get(rule.scope)
        if nodes is None:
            nodes = found[rule.scope] = list(nodes_at(obj, rule.scope))
        for node, path in nodes:
            errors += rule.check(node, path)
    return errors
