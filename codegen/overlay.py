"""The hand-written overlay: what the documents cannot say, like kubebuilder markers.

`schemas/overlay.yaml` holds, per kind, the names and scope of the CRD, which fields are
required, free-form, string maps or Kubernetes types, list types, subresources and
printer columns; per document, the output folder and, for a page of descriptions without
field names, the reference schema that names them. Unknown keys are errors, so a typo
cannot silently drop a fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

__all__ = ["FileOverlay", "KindOverlay", "Overlay", "OverlayError", "load_overlay", "plural_of"]


class OverlayError(Exception):
    """The overlay names a key, kind or path that does not exist."""


@dataclass(frozen=True)
class KindOverlay:
    plural: str = ""
    singular: str = ""
    shortNames: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    scope: str = ""
    required: tuple[str, ...] = ()
    freeForm: tuple[str, ...] = ()
    stringMaps: tuple[str, ...] = ()
    kubernetesTypes: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    listTypes: dict[str, str] = field(default_factory=dict)
    subresources: dict[str, Any] = field(default_factory=dict)
    printerColumns: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class FileOverlay:
    folder: str = ""
    # A description-only page: the reference schema (a file beside it) that names its
    # fields, and the fields whose page text is only the first sentences of the reference's.
    reference: str = ""
    abridged: tuple[str, ...] = ()


@dataclass(frozen=True)
class Overlay:
    kinds: dict[str, KindOverlay]
    files: dict[str, FileOverlay]

    def kind(self, name: str) -> KindOverlay:
        return self.kinds.get(name, KindOverlay())

    def folder(self, file: str) -> str:
        """The output sub-folder for kinds read from `file` ("" for the top level)."""
        return self.files.get(Path(file).name, FileOverlay()).folder


def plural_of(kind: str) -> str:
    """The kubebuilder rule: lower-case; `y` -> `ies`; `s`, `x`, `ch`, `sh` -> `+es`; else `+s`."""
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def _build(cls: type[Any], raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise OverlayError(f"{where}: expected a mapping, found {type(raw).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise OverlayError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    return cls(**values)


def load_overlay(path: Path) -> Overlay:
    where = path.as_posix()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else 0
        raise OverlayError(f"{where}:{line}: expected valid YAML: {exc.problem}") from exc
    kinds = {
        name: _build(KindOverlay, body or {}, f"{where}: kinds.{name}")
        for name, body in (raw.get("kinds") or {}).items()
    }
    files = {
        name: _build(FileOverlay, body or {}, f"{where}: files.{name}")
        for name, body in (raw.get("files") or {}).items()
    }
    return Overlay(kinds=kinds, files=files)
