"""Whether a pool's images can run its QEMU layout: what admission refuses or warns of.

Facts of Jumpstarter's published exporter image (`quay.io/jumpstarter-dev/jumpstarter`):
it carries no QEMU (release 0.9.0's Containerfile installs no qemu-system and no
qemu-img; main runs QEMU in its runtime image), and its releases up to
`JUMPSTARTER_RELEASE` have a QEMU driver that refuses `launcher_socket`. So:

- `sidecar`, a QEMU driver in the template, and that image at such a release: every
  instance fails when `jmp run` builds its drivers, so a set is refused;
- `exporter`, a QEMU driver, and that image at any tag: the exporter registers, but
  powering the guest on fails (no `qemu-system-*`): a warning (the image to name is the
  one this project ships, `QEMU_EXPORTER_IMAGE`);
- `exporter` named, and a runtime image named by the class or set: it is not run; a
  warning;
- a firmware or architecture the exporter image cannot boot: `firmware_findings`
  (`api.provisioners.qemu_firmware`), for a class's own parameters and a set's merged.

The layout a pool names is its parameters' `layout`. Where it names none, the pool runs
with its reconciler's default: `exporter` under `virtualtarget reconcile` (this project's
install, whose admission this is), `sidecar` under `exporter-set-controller`. So an unset
layout is judged only where that cannot be wrong under either: a QEMU pool on Jumpstarter's
published exporter image at a release up to this one fails under both (no QEMU in it, and
a driver that refuses `launcher_socket`), so it is warned of; a runtime image is not, as
`sidecar` runs it. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from api.fielderrors import FieldError
from api.imagepolicy import effective_images, repository
from api.jumpstarter import JUMPSTARTER_RELEASE, JUMPSTARTER_REPOSITORIES, QEMU_DRIVER
from api.provisioners.qemu import DEFAULT_IMAGES, PROVISIONER, Layout
from api.provisioners.qemu_firmware import firmware_findings

__all__ = ["PUBLISHED_EXPORTER", "class_layout_findings", "set_layout_findings"]

Findings = tuple[list[FieldError], list[str]]

PUBLISHED_EXPORTER = f"{JUMPSTARTER_REPOSITORIES}jumpstarter"
_RELEASE_TAG = re.compile(r":v?(\d+)\.(\d+)\.(\d+)$")


def _release(reference: str) -> tuple[int, ...] | None:
    """The release of a tagged reference of Jumpstarter's published exporter image."""
    if "@" in reference or repository(reference) != PUBLISHED_EXPORTER:
        return None
    found = _RELEASE_TAG.search(reference)
    return tuple(int(part) for part in found.groups()) if found else None


def _predates_sidecar(reference: str) -> bool:
    release = _release(reference)
    newest = tuple(int(part) for part in JUMPSTARTER_RELEASE.split("."))
    return release is not None and release <= newest


def _named_layout(parameters: Any) -> Layout | None:
    named = parameters.get("layout") if isinstance(parameters, Mapping) else None
    return Layout(named) if named in {m.value for m in Layout} else None


def _has_qemu_driver(set_spec: Mapping[str, Any]) -> bool:
    template = set_spec.get("template")
    spec = template.get("spec") if isinstance(template, Mapping) else None
    drivers = spec.get("drivers") if isinstance(spec, Mapping) else None
    return isinstance(drivers, list) and any(
        isinstance(d, Mapping) and d.get("type") == QEMU_DRIVER and not d.get("ref")
        for d in drivers
    )


def _unused_runtime(layout: Layout | None, named_by: str) -> list[str]:
    if layout is not Layout.EXPORTER or not named_by:
        return []
    return [
        f"spec.images.runtime: not run: layout exporter runs QEMU in the exporter's container "
        f"(named by the {named_by})"
    ]


def class_layout_findings(class_spec: Mapping[str, Any]) -> Findings:
    """A class's own: a runtime image its layout does not run, and a firmware or
    architecture its exporter image cannot boot."""
    if class_spec.get("provisioner") != PROVISIONER:
        return [], []
    parameters = class_spec.get("parameters")
    layout = _named_layout(parameters)
    images = class_spec.get("images")
    runtime = images.get("runtime") if isinstance(images, Mapping) else None
    named = isinstance(runtime, Mapping) and bool(runtime.get("image"))
    exporter = _exporter_image({}, class_spec)
    errors, warnings = firmware_findings(_mapping(parameters), exporter, layout)
    if _published_without_qemu(exporter, layout):
        warnings = []  # its own warning, on each set, says more
    return errors, _unused_runtime(layout, "class" if named else "") + warnings


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _exporter_image(set_spec: Mapping[str, Any], class_spec: Mapping[str, Any]) -> str:
    roles = {r.role: r for r in effective_images(set_spec, class_spec, DEFAULT_IMAGES)}
    return roles["exporter"].reference


def _published_without_qemu(exporter: str, layout: Layout | None) -> bool:
    """Jumpstarter's published exporter image, in a layout that runs QEMU in it (unset: at
    a release up to this one, which fails under either default)."""
    return repository(exporter) == PUBLISHED_EXPORTER and (
        layout is Layout.EXPORTER or (layout is None and _predates_sidecar(exporter))
    )


def set_layout_findings(
    set_spec: Mapping[str, Any], class_spec: Mapping[str, Any], merged: Mapping[str, Any]
) -> Findings:
    """A set's images against the layout and firmware its `merged` parameters (class and
    set) name."""
    if class_spec.get("provisioner") != PROVISIONER:
        return [], []
    layout = _named_layout(merged)
    roles = {r.role: r for r in effective_images(set_spec, class_spec, DEFAULT_IMAGES)}
    exporter = roles["exporter"].reference
    runtime = roles.get("runtime")
    named_by = {"ExporterSet": "set", "VirtualTargetClass": "class"}.get(
        runtime.source if runtime else "", ""
    )
    warnings = _unused_runtime(layout, named_by)
    if not _has_qemu_driver(set_spec):
        return [], warnings
    if layout is Layout.SIDECAR and _predates_sidecar(exporter):
        detail = (
            f"the exporter image {exporter} is Jumpstarter {JUMPSTARTER_RELEASE} or older, "
            "whose QEMU driver refuses launcher_socket: name an exporter image built from "
            "Jumpstarter main in spec.images.exporter, or use layout exporter "
            "(class and set parameters merged)"
        )
        return [FieldError.invalid("spec.parameters.layout", layout.value, detail)], warnings
    errors, firmware_warnings = firmware_findings(merged, exporter, layout)
    if _published_without_qemu(exporter, layout):
        firmware_warnings = [
            f"spec.images.exporter: {exporter} has no QEMU, which layout exporter runs there"
        ]
    return errors, warnings + firmware_warnings
