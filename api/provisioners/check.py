"""Check provisioner parameters: errors for known keys with bad values, warnings for keys
the provisioner does not know and for keys that moved (`RENAMED_PARAMETERS`).

The webhook (class and set admission, `virtualtarget validate`) and the reconciler (a set
whose merged parameters are unusable is not scaled) call this one function. Errors are
field errors under `spec.parameters`; unknown keys are warnings because the provisioners
this mirrors pass them through. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from api.fielderrors import FieldError, format_value, join_path
from api.provisioners import PARAMETER_MODELS, RENAMED_PARAMETERS

__all__ = [
    "PARAMETERS",
    "ParameterCheck",
    "check_parameters",
    "renamed_parameter_warning",
    "unknown_parameter_warning",
]

PARAMETERS = "spec.parameters"
_MAX_WARNING = 120


@dataclass(frozen=True, slots=True)
class ParameterCheck:
    errors: tuple[FieldError, ...] = ()
    # (field path, the known keys at that level) of every key the model does not know
    unknown: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (old path, new path) under `spec.parameters` of every key given that moved
    renamed: tuple[tuple[str, str], ...] = ()

    @property
    def warnings(self) -> list[str]:
        return [
            *(unknown_parameter_warning(path, known) for path, known in self.unknown),
            *(renamed_parameter_warning(old, new) for old, new in self.renamed),
        ]


def check_parameters(
    provisioner: str, parameters: Mapping[str, Any], *, merged: bool = False
) -> ParameterCheck:
    """Errors and unknown keys of `parameters` for `provisioner`: a class's own, or
    (`merged`) a set's deep-merged over its class's. A provisioner without a model here
    is its own controller's to check."""
    model = PARAMETER_MODELS.get(provisioner)
    if model is None:
        return ParameterCheck()
    errors: tuple[FieldError, ...] = ()
    scope = f"{provisioner}, class and set parameters merged" if merged else provisioner
    try:
        model.model_validate(parameters)
    except ValidationError as exc:
        errors = tuple(_field_error(error, scope) for error in exc.errors())
    moved = RENAMED_PARAMETERS.get(provisioner, ())
    renamed = tuple((old, new) for old, new in moved if _given(parameters, old))
    return ParameterCheck(errors, tuple(_unknown(model, parameters, PARAMETERS)), renamed)


def unknown_parameter_warning(path: str, known: tuple[str, ...]) -> str:
    """`spec.parameters.colour: unknown parameter, passed through (known: arch, ...)`,
    at most 120 characters: the last known keys give way to `…` first, down to one, so a
    short path stays whole; then a long path is shortened in the middle."""
    tail = _unknown_tail(known)
    for shown in range(len(known) - 1, 0, -1):
        if len(path) + len(tail) <= _MAX_WARNING:
            break
        tail = _unknown_tail((*known[:shown], "…"))
    room = _MAX_WARNING - len(tail)
    if len(path) > room:
        keep = max(room - 1, 0)
        path = path[: keep // 2] + "…" + path[len(path) - (keep - keep // 2) :]
    return (path + tail)[:_MAX_WARNING]


def _unknown_tail(known: tuple[str, ...]) -> str:
    return f": unknown parameter, passed through (known: {', '.join(known)})"


def renamed_parameter_warning(old: str, new: str) -> str:
    """`spec.parameters.resources.storage: deprecated: use spec.parameters.storage.size,
    which wins where both are set`."""
    return f"{PARAMETERS}.{old}: deprecated: use {PARAMETERS}.{new}, which wins where both are set"


def _given(parameters: Any, path: str) -> bool:
    """Whether the dotted `path` holds a value (not null) in `parameters`."""
    value = parameters
    for key in path.split("."):
        if not isinstance(value, Mapping) or value.get(key) is None:
            return False
        value = value[key]
    return True


def _aliases(model: type[BaseModel]) -> dict[str, Any]:
    """JSON key -> field annotation."""
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model inside `X | None`, if the field holds one."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _unknown(model: type[BaseModel], data: Any, path: str) -> list[tuple[str, tuple[str, ...]]]:
    if not isinstance(data, Mapping):
        return []
    fields = _aliases(model)
    found: list[tuple[str, tuple[str, ...]]] = []
    for key, value in data.items():
        child = join_path(path, str(key))
        if key not in fields:
            found.append((child, tuple(fields)))
        elif (sub := _submodel(fields[key])) is not None:
            found += _unknown(sub, value, child)
    return found


def _field_error(error: Any, scope: str) -> FieldError:
    location = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
    field = f"{PARAMETERS}{location}"
    message = str(error["msg"]).removeprefix("Value error, ")
    detail = f"{message} ({scope})"
    if error["type"] == "missing":
        return FieldError.required(field, detail)
    value = error.get("input")
    return FieldError.invalid(field, value if _plain(value) else format_value(str(value)), detail)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool | list | dict)
