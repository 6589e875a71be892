"""The Dockerfile's text stays minimal and non-root (tests/image builds it and checks the
image itself)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from harness.deploy_render import REPO, render_overlay
from tests.dockerfiles import stages as dockerfile_stages
from virtualtarget.cli import SUBCOMMANDS


def containers() -> list[dict[str, Any]]:
    return [
        c
        for o in render_overlay("cert-manager")
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    ]


def shipped_packages() -> set[str]:
    """The packages the wheel ships, as pyproject.toml lists them (`api*` -> `api`): one
    added there and not copied into the image fails below instead of in the cluster."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]}


FIRST_PARTY = shipped_packages()


def stages() -> list[list[tuple[str, str]]]:
    return dockerfile_stages((REPO / "Dockerfile").read_text())


def copied_sources() -> set[str]:
    ((build, *_),) = [stages()[:1]]
    return {src for op, args in build if op == "COPY" for src in args.split()[:-1]}


def imported_packages(module: str, seen: set[str]) -> None:
    """First-party modules `module` imports, transitively (function-level imports too)."""
    if module in seen:
        return
    path = REPO / Path(*module.split("."))
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not file.is_file():
        return
    seen.add(module)
    for node in ast.walk(ast.parse(file.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] in FIRST_PARTY:
                imported_packages(name, seen)


def test_final_stage_runs_as_the_deployments_non_root_user() -> None:
    final = stages()[-1]
    (user,) = [args for op, args in final if op == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # runAsNonRoot can only check a numeric user
    for deployment in (o for o in render_overlay("cert-manager") if o["kind"] == "Deployment"):
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)


def test_final_stage_only_copies_the_built_environment() -> None:
    final = stages()[-1]
    assert len(stages()) >= 2
    ops = {op for op, _ in final}
    assert "RUN" not in ops  # nothing installed, so no package manager or compiler runs
    copies = [args for op, args in final if op in ("COPY", "ADD")]
    assert copies and all(args.startswith("--from=build ") for args in copies)
    assert final[0][1] == stages()[0][0][1].split(" AS ")[0]  # same base: no toolchain added


def test_build_copies_the_packages_the_entry_points_import_and_no_tooling() -> None:
    # The command line, and the subcommand each Deployment runs (imported lazily by name).
    entry = ["virtualtarget.cli"] + [SUBCOMMANDS[c["args"][0]][0] for c in containers()]
    seen: set[str] = set()
    for module in entry:
        imported_packages(module, seen)
    needed = {m.split(".")[0] for m in [*entry, *seen]}
    assert needed <= copied_sources()
    # Generators, tests and data stay out of the image; the licence goes into the wheel.
    assert copied_sources() == {"pyproject.toml", "README.md", "LICENSE", "requirements.lock"} | (
        FIRST_PARTY - {"codegen"}
    )


def test_dockerignore_admits_only_what_is_copied() -> None:
    lines = [
        line
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*"
    admitted = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert admitted == copied_sources()


def test_image_name_matches_the_deployments() -> None:
    (image,) = {c["image"] for c in containers()}
    assert f"docker build -t {image} ." in (REPO / "Dockerfile").read_text()


def test_build_installs_the_lock_with_hashes_then_the_package_offline_without_extras() -> None:
    installs = [
        args.split("pip install", 1)[1].split("&&")[0].split()
        for op, args in stages()[0]
        if op == "RUN" and "pip install" in args
    ]
    assert len(installs) == 2, "the locked dependencies, then the package"
    dependencies, package = installs
    assert "--require-hashes" in dependencies and dependencies[-2:] == ["-r", "requirements.lock"]
    # No `.[extra]`: the image carries the runtime only; nothing is resolved again.
    assert [a for a in package if not a.startswith("-")] == ["."]
    assert "--no-index" in package and "--no-build-isolation" in package


def test_the_deployed_commands_do_not_import_matplotlib() -> None:
    # matplotlib is an optional extra (simulate only); here it is installed (dev), so a
    # stray import would go unnoticed in the tests and break the image.
    probe = (
        "import sys\n"
        "from virtualtarget.cli import main\n"
        "for command in ('webhook', 'reconcile', 'plan'):\n"
        "    try:\n"
        "        main([command, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"
