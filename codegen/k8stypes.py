"""Schemas of the Kubernetes types that documents name but do not spell out.

A document says `selector` is an object; Kubernetes says it is a LabelSelector. The
overlay names the type (`kubernetesTypes: {spec.selector: LabelSelector}`) and the
fragment here is merged under the documented fields: the document keeps its
descriptions, enums and defaults, the fragment adds what the text leaves out. The
fragments follow what controller-gen emits for the same Go types.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KUBERNETES_TYPES", "ROOT_FIELDS"]

_STRING: dict[str, Any] = {"type": "string"}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _STRING}

# resource.Quantity: an integer or a string such as `500m` or `2Gi`.
QUANTITY: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": (
        r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\."
        r"[0-9]*)?)|(\.[0-9]+))))?$"
    ),
    "x-kubernetes-int-or-string": True,
}

LABEL_SELECTOR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {
                        "type": "string",
                        "description": "key is the label key that the selector applies to.",
                    },
                    "operator": {
                        "type": "string",
                        "description": (
                            "operator represents a key's relationship to a set of values. Valid "
                            "operators are In, NotIn, Exists and DoesNotExist."
                        ),
                    },
                    "values": {
                        "type": "array",
                        "items": _STRING,
                        "x-kubernetes-list-type": "atomic",
                        "description": (
                            "values is an array of string values. If the operator is In or "
                            "NotIn, the values array must be non-empty. If the operator is "
                            "Exists or DoesNotExist, the values array must be empty."
                        ),
                    },
                },
            },
            "x-kubernetes-list-type": "atomic",
        },
        "matchLabels": _STRING_MAP,
    },
    "x-kubernetes-map-type": "atomic",
}

TOLERATION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "effect": _STRING,
        "key": _STRING,
        "operator": _STRING,
        "tolerationSeconds": {"type": "integer", "format": "int64"},
        "value": _STRING,
    },
}

RESOURCE_REQUIREMENTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": _STRING, "request": _STRING},
            },
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
        "limits": {"type": "object", "additionalProperties": QUANTITY},
        "requests": {"type": "object", "additionalProperties": QUANTITY},
    },
}

CONDITION: dict[str, Any] = {
    "type": "object",
    "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    "properties": {
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "message": {"type": "string", "maxLength": 32768},
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "reason": {
            "type": "string",
            "maxLength": 1024,
            "minLength": 1,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "type": {
            "type": "string",
            "maxLength": 316,
            "pattern": (
                r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9"
                r"][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
            ),
        },
    },
}

KUBERNETES_TYPES: dict[str, dict[str, Any]] = {
    "LabelSelector": LABEL_SELECTOR,
    "Toleration": TOLERATION,
    "ResourceRequirements": RESOURCE_REQUIREMENTS,
    "Condition": CONDITION,
    "Quantity": QUANTITY,
}

# Every object has these three; documents that omit them get the usual text.
ROOT_FIELDS: dict[str, dict[str, Any]] = {
    "apiVersion": {
        "type": "string",
        "description": (
            "APIVersion defines the versioned schema of this representation of an object. "
            "Servers should convert recognized schemas to the latest internal value, and may "
            "reject unrecognized values. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
        ),
    },
    "kind": {
        "type": "string",
        "description": (
            "Kind is a string value representing the REST resource this object represents. "
            "Servers may infer this from the endpoint the client submits requests to. Cannot be "
            "updated. In CamelCase. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
        ),
    },
    "metadata": {"type": "object"},
}
