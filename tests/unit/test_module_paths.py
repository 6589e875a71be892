"""Every module path the documentation and the docstrings name exists.

A reference in backquotes, `pool.rules.planner.plan` or `pool/model/keys.py`,
of one of the product's packages, must resolve to a module (and the attribute it names) or
a Python file or folder of this tree; so must each module `.importlinter` names. A module
that moved leaves no reference behind pointing at where it was.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "webhook", "reconciler", "certs", "codegen", "scrape", "virtualtarget")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"`((?:{'|'.join(PACKAGES)})(?:\.{_NAME})+)")
API_GROUPS = {"virtualtarget.jumpstarter.dev"}  # spelled like a module path, but no module
SLASHED = re.compile(rf"`((?:{'|'.join(PACKAGES)})/[A-Za-z0-9_./-]*[A-Za-z0-9_/])")


def _resolves(reference: str) -> bool:
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: ModuleType | object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def _documents() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", ".importlinter"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if not name.startswith("api/models/")]


def test_every_named_module_path_exists() -> None:
    missing = []
    for path in _documents():
        text = path.read_text()
        if path.name == ".importlinter":
            names = re.findall(r"^\s+((?:reconciler|webhook|api)(?:\.\w+)+)$", text, re.M)
            refs = [f"`{name}" for name in names]
            text = " ".join(refs)
        for match in DOTTED.finditer(text):
            if match.group(1) not in API_GROUPS and not _resolves(match.group(1)):
                missing.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
        for match in SLASHED.finditer(text):
            leaf = match.group(1).rstrip("/").rsplit("/", 1)[-1]
            if "." in leaf and not leaf.endswith(".py"):
                continue  # another program's file (Jumpstarter's `api/v1alpha1/...go`)
            if not (ROOT / match.group(1)).exists():
                missing.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    assert not missing, "\n".join(missing)
