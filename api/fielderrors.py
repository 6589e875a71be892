"""Field errors in the style kube-apiserver prints them.

`spec.minReplicas: Invalid value: 5: must be less than or equal to spec.maxReplicas (4)`

Pure data and formatting: no I/O, importable from anywhere (webhook, reconciler, CLI).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["ErrorType", "FieldError", "format_value", "join_path"]


class ErrorType(Enum):
    """The subset of k8s.io/apimachinery/pkg/util/validation/field.ErrorType we emit."""

    INVALID = ("Invalid value", "FieldValueInvalid")
    REQUIRED = ("Required value", "FieldValueRequired")
    DUPLICATE = ("Duplicate value", "FieldValueDuplicate")
    NOT_SUPPORTED = ("Unsupported value", "FieldValueNotSupported")
    FORBIDDEN = ("Forbidden", "FieldValueForbidden")
    TOO_LONG = ("Too long", "FieldValueTooLong")

    @property
    def text(self) -> str:
        return self.value[0]

    @property
    def reason(self) -> str:
        """The CEL rule `reason` (and StatusCause type) for this error type."""
        return self.value[1]


_NO_VALUE = object()


def format_value(value: Any) -> str:
    """Render a bad value as kube-apiserver does: strings quoted, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def join_path(base: str, child: str | int) -> str:
    """Append a field name or a list index to a dotted field path."""
    if isinstance(child, int):
        return f"{base}[{child}]"
    if not base:
        return child
    return f"{base}.{child}"


@dataclass(frozen=True)
class FieldError:
    """One failing field. `value` is omitted from the text for REQUIRED and FORBIDDEN."""

    type: ErrorType
    field: str
    detail: str = ""
    value: Any = _NO_VALUE

    def __str__(self) -> str:
        parts = [f"{self.field}: {self.type.text}"]
        shows_value = self.type in (ErrorType.INVALID, ErrorType.DUPLICATE, ErrorType.NOT_SUPPORTED)
        if shows_value and self.value is not _NO_VALUE:
            parts.append(format_value(self.value))
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)

    @classmethod
    def invalid(cls, field: str, value: Any, detail: str) -> FieldError:
        return cls(ErrorType.INVALID, field, detail, value)

    @classmethod
    def required(cls, field: str, detail: str = "") -> FieldError:
        return cls(ErrorType.REQUIRED, field, detail)

    @classmethod
    def duplicate(cls, field: str, value: Any) -> FieldError:
        return cls(ErrorType.DUPLICATE, field, "", value)

    @classmethod
    def not_supported(cls, field: str, value: Any, supported: list[str]) -> FieldError:
        listed = ", ".join(json.dumps(s) for s in supported)
        return cls(ErrorType.NOT_SUPPORTED, field, f"supported values: {listed}", value)

    @classmethod
    def forbidden(cls, field: str, detail: str) -> FieldError:
        return cls(ErrorType.FORBIDDEN, field, detail)

    @classmethod
    def too_long(cls, field: str, detail: str) -> FieldError:
        return cls(ErrorType.TOO_LONG, field, detail)
