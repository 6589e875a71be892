"""Jumpstarter's pull request #927 (the KubeVirt provisioner), read from its vendored
source tarball (`../shared/vendor/jumpstarter-pr927-kubevirt.tar.gz`, or the tarball
`JUMPSTARTER_PR927_SOURCE` names): its Go, its guide's YAML blocks and the dataclass
fields of its exporter driver, for the tests to hold this project's KubeVirt provisioner
to them."""

from __future__ import annotations

import ast
import re
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from harness.images import kubevirt_source_tarball

__all__ = ["driver_fields", "driver_package", "go_constants", "guide_documents", "source_text"]

_TOP = "jumpstarter-pr927-cd305c7"
GO_DIR = "controller/internal/exporterset/provisioners/kubevirt"
GUIDE = "docs/source/getting-started/guides/kubevirt-provisioner.md"
DRIVER = "python/packages/jumpstarter-driver-kubevirt/jumpstarter_driver_kubevirt/driver.py"
_CONSTANT = re.compile(r'^\s*(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|\d+)\s*$', re.MULTILINE)
_FENCE = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


@cache
def source_text(path: str) -> str:
    """One file of the pull request, by its path in the repository."""
    with tarfile.open(kubevirt_source_tarball()) as tar:
        member = tar.extractfile(f"{_TOP}/{path}")
        assert member is not None, path
        return member.read().decode()


def go_constants(name: str) -> dict[str, Any]:
    """The string and integer constants of one Go file of the provisioner."""
    found: dict[str, Any] = {}
    for key, value in _CONSTANT.findall(source_text(f"{GO_DIR}/{name}")):
        found[key] = ast.literal_eval(value)
    return found


def guide_documents() -> list[dict[str, Any]]:
    """The guide's YAML blocks, as a user copies them."""
    return [yaml.safe_load(block) for block in _FENCE.findall(source_text(GUIDE))]


def driver_fields() -> dict[str, set[str]]:
    """Each class of the driver module: the config keys its dataclass reads (its own
    annotated fields and its bases' within the module; `_`-prefixed ones are not
    config)."""
    tree = ast.parse(source_text(DRIVER))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def fields(name: str) -> set[str]:
        node = classes[name]
        own = {
            item.target.id
            for item in node.body
            if isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and not item.target.id.startswith("_")
        }
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                own |= fields(base.id)
        return own

    return {name: fields(name) for name in classes}


def driver_package(into: Path) -> Path:
    """The driver's Python package, unmodified, unpacked under `into` (which then goes
    on a client's PYTHONPATH: its client classes, which a client loads by the names the
    exporter reports)."""
    package = DRIVER.rsplit("/", 1)[0]
    with tarfile.open(kubevirt_source_tarball()) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(f"{_TOP}/{package}/"):
                target = into / "jumpstarter_driver_kubevirt" / Path(member.name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                extracted = tar.extractfile(member)
                assert extracted is not None
                target.write_bytes(extracted.read())
    return into
