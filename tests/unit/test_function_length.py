"""No hand-written function is longer than 80 lines.

Checked over every Python file of the product and its tooling (`api/` but its generated
`models/`, `codegen/`, `pool/`, `webhook/`, `reconciler/`, `certs/`, `scrape/`,
`virtualtarget/`, `harness/`, `bench/`), decorators included. The one kind of exception
is a straight-line manifest (an object written out field by field, nothing to decide), and
it says so in a comment on the line above its `def`, naming itself `straight-line
manifest`. Tests are scenarios read top to bottom and are not held to it.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80
CHECKED = (
    "api",
    "codegen",
    "pool",
    "webhook",
    "reconciler",
    "certs",
    "scrape",
    "virtualtarget",
    "harness",
    "bench",
)
GENERATED = ("api/models/",)
EXEMPT = "straight-line manifest"


def _files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [
        ROOT / name
        for name in sorted(set(listed))
        if name.split("/")[0] in CHECKED and not name.startswith(GENERATED)
    ]


def long_functions(source: str, name: str) -> list[str]:
    """The functions of `source` over the limit and not exempt, as `name:line function`."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        length = (node.end_lineno or node.lineno) - first + 1
        above = lines[first - 2] if first >= 2 else ""
        if length > LIMIT and not (above.strip().startswith("#") and EXEMPT in above):
            found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_function_is_longer_than_the_limit() -> None:
    found = [
        entry
        for path in _files()
        for entry in long_functions(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not found, f"functions over {LIMIT} lines:\n" + "\n".join(found)


def test_the_check_sees_a_long_function_and_the_exemption() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    assert long_functions(f"def long():\n{body}", "plain") == ["plain:1 long: 81 lines"]
    assert long_functions(f"# {EXEMPT}: a Pod, field by field\ndef long():\n{body}", "x") == []
    assert long_functions(f"def short():\n{body[: -len(body.splitlines()[-1]) - 1]}", "y") == []
