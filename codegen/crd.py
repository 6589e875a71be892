"""Kind schema + overlay + rule table -> an apiextensions.k8s.io/v1 CustomResourceDefinition.

The single-object rules come from `api.rules`, the table the webhook also runs, so the
CEL in the CRD and the webhook's check are one fact written once.
"""

from __future__ import annotations

import copy
from typing import Any

from api.rules import Rule, rules_for
from codegen.fieldtree import KindDoc
from codegen.jsonschema import Schema, crd_view, node_at
from codegen.overlay import KindOverlay, OverlayError, plural_of

__all__ = ["build_crd", "crd_name", "validation_entry"]


def crd_name(doc: KindDoc, overlay: KindOverlay) -> str:
    return f"{overlay.plural or plural_of(doc.kind)}.{doc.group}"


def validation_entry(rule: Rule) -> dict[str, Any]:
    """One `x-kubernetes-validations` item for a rule."""
    entry: dict[str, Any] = {
        "rule": rule.cel,
        "message": rule.message,
        "reason": rule.error_type.reason,
    }
    if rule.field_path:
        entry["fieldPath"] = rule.field_path
    return entry


def _attach_rules(schema: Schema, kind: str) -> None:
    for rule in rules_for(kind):
        if rule.apiserver_check:
            continue  # kube-apiserver refuses it already: CEL would repeat the message
        node = node_at(schema, rule.scope)
        if node is None:
            raise OverlayError(
                f"api/rules.py: rule {rule.id}: {kind} has no schema node at {rule.scope}"
            )
        node.setdefault("x-kubernetes-validations", []).append(validation_entry(rule))


def build_crd(doc: KindDoc, overlay: KindOverlay, schema: Schema) -> dict[str, Any]:
    plural = overlay.plural or plural_of(doc.kind)
    names: dict[str, Any] = {
        "kind": doc.kind,
        "listKind": f"{doc.kind}List",
        "plural": plural,
        "singular": overlay.singular or doc.kind.lower(),
    }
    if overlay.shortNames:
        names["shortNames"] = list(overlay.shortNames)
    if overlay.categories:
        names["categories"] = list(overlay.categories)
    open_api = crd_view(schema)
    _attach_rules(open_api, doc.kind)
    version: dict[str, Any] = {
        "name": doc.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": open_api},
    }
    if overlay.subresources:
        version["subresources"] = copy.deepcopy(overlay.subresources)
    if overlay.printerColumns:
        version["additionalPrinterColumns"] = [dict(column) for column in overlay.printerColumns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{doc.group}"},
        "spec": {
            "group": doc.group,
            "names": names,
            "scope": overlay.scope or doc.scope or "Namespaced",
            "versions": [version],
        },
    }
