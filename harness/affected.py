"""The developer's loop: run the tests a change touches, not the whole suite.

    make changed                      # what differs from main, committed or not
    make changed BASE=HEAD            # only what is not committed yet
    python -m harness.affected --list # print the test modules, run nothing

A test module is touched when it changed, or when it imports, directly or through
other modules, a Python module that changed (the import graph, from grimp, which
import-linter uses). A change outside Python sources maps to the tests that read it:
`schemas/`, `codegen/` and `crds/` to the codegen and CRD tests (ours against the
release's too), `deploy/` to the deploy tests, `docs/` to the documentation tests,
`images/` and the Dockerfile to the image tests. Anything else runs the unit tier. The
tests run in parallel workers, as `make test` runs them; a node-tier or e2e module among
them needs what those tiers need.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.controlplane import REPO_ROOT

__all__ = ["affected_tests", "changed_files", "main"]

PACKAGES = ("api", "bench", "certs", "codegen", "harness", "pool", "reconciler", "scrape",
            "tests", "virtualtarget", "webhook")  # fmt: skip
# Files that are not Python modules, by the folder they are in: the tests that read them.
READERS = {
    "schemas": ("tests/unit/test_codegen_*.py", "tests/unit/test_release_crds.py",
                "tests/e2e/test_crds_e2e.py"),
    "crds": ("tests/unit/test_codegen_*.py", "tests/unit/test_release_crds.py",
             "tests/e2e/test_crds_e2e.py"),
    "api": ("tests/unit/test_codegen_*.py",),
    "deploy": ("tests/unit/test_deploy_*.py", "tests/e2e/test_deploy_e2e.py"),
    "docs": ("tests/unit/test_docs_pages.py", "tests/unit/test_docpages.py",
             "tests/unit/test_module_paths.py", "tests/unit/test_tutorial_page.py",
             "tests/unit/test_install_page.py"),
    "examples": ("tests/unit/test_codegen_examples.py", "tests/e2e/test_examples_e2e.py"),
    "images": ("tests/unit/test_qemu_exporter_image.py", "tests/image/test_*.py"),
    "Dockerfile": ("tests/unit/test_deploy_dockerfile.py", "tests/image/test_*.py"),
}  # fmt: skip
UNIT_TIER = ("tests/unit",)


def changed_files(base: str) -> list[str]:
    """Paths changed since `base` (its merge base with HEAD), in the work tree included."""

    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"changed: git {' '.join(args)}: {out.stderr.strip()}")
        return [line for line in out.stdout.splitlines() if line]

    since = git("merge-base", base, "HEAD")[0] if base != "HEAD" else "HEAD"
    tracked = git("diff", "--name-only", since)
    untracked = git("ls-files", "--others", "--exclude-standard")
    return sorted(set(tracked) | set(untracked))


def _module(path: str) -> str | None:
    parts = Path(path).with_suffix("").parts
    if path.endswith(".py") and parts and parts[0] in PACKAGES:
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def _is_test(module: str) -> bool:
    return module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")


def affected_tests(paths: Iterable[str]) -> list[str]:
    """The test files (or folders) to run for a change to `paths`."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    targets: set[str] = set()
    for path in paths:
        module = _module(path)
        if module is not None and module in graph.modules:
            touched = {module} | graph.find_downstream_modules(module)
            targets |= {f"{m.replace('.', '/')}.py" for m in touched if _is_test(m)}
        elif module is None:  # not Python: whoever reads it (Markdown of bench/: nobody)
            top = Path(path).parts[0] if Path(path).parts else ""
            for pattern in READERS.get(top, () if top == "bench" else UNIT_TIER):
                targets |= {str(p.relative_to(REPO_ROOT)) for p in REPO_ROOT.glob(pattern)}
    return sorted(t for t in targets if (REPO_ROOT / t).exists())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.affected", description=__doc__)
    parser.add_argument("--base", default="main", help="compare with (default: main)")
    parser.add_argument("--list", action="store_true", help="print the tests, run nothing")
    parser.add_argument("--workers", default="3", help="pytest-xdist workers")
    args = parser.parse_args(argv)
    changed = changed_files(args.base)
    tests = affected_tests(changed)
    if args.list or not tests:
        none = f"changed: no test reads what changed since {args.base}"
        print("\n".join(tests) if tests else none)
        return 0
    print(f"changed: {len(changed)} file(s) since {args.base}: running {len(tests)} test module(s)")
    command = [sys.executable, "-m", "pytest", "-n", args.workers, "--dist", "loadscope", *tests]
    return subprocess.run(command, cwd=REPO_ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
