"""Build the wheel of Jumpstarter's KubeVirt driver (pull request #927) from its unmodified
source folder, without its build backend.

The driver's pyproject.toml builds with hatchling, hatch-vcs and hatch-pin-jumpstarter in
Jumpstarter's git checkout: its version comes from git tags (`raw-options.root`
`../../../`) and its `source_archive` URL from `git rev-parse HEAD`, and the vendored
tarball is a `git archive` with no history, so hatch-vcs cannot run on it (and
hatch-pin-jumpstarter only rewrites an sdist's pins). This writes what hatchling's
wheel would hold, from the same files:

- the package folder `jumpstarter_driver_kubevirt/` as it is (hatchling's default
  selection: every file under it, its tests included);
- METADATA from `[project]` (name, summary, author, license, requires-python,
  dependencies as written, the README as description), with `--version` for hatch-vcs's
  version and `--commit` for its `{commit_hash}`;
- entry_points.txt from `[project.entry-points]`, the repository's LICENSE under
  `licenses/`, WHEEL and RECORD.

Reproducible: fixed timestamps and modes, sorted members. Standard library only, so the
build stage's python3 runs it:

    python3 build_wheel.py SOURCE LICENSE OUT --version V --commit SHA
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

PACKAGE = "jumpstarter_driver_kubevirt"
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def metadata(
    project: dict[str, Any], version: str, commit: str, readme: str, urls: dict[str, str]
) -> str:
    lines = [
        "Metadata-Version: 2.4",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
    ]
    for name, url in urls.items():
        lines.append(f"Project-URL: {name}, {url.format(commit_hash=commit)}")
    authors = ", ".join(f"{a['name']} <{a['email']}>" for a in project.get("authors", []))
    if authors:
        lines.append(f"Author-email: {authors}")
    lines += [
        f"License-Expression: {project['license']}",
        "License-File: LICENSE",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Requires-Dist: {dependency}" for dependency in project["dependencies"]]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def entry_points(project: dict[str, Any]) -> str:
    out = []
    for group, entries in sorted(project.get("entry-points", {}).items()):
        out.append(f"[{group}]")
        out += [f"{name} = {target}" for name, target in entries.items()]
        out.append("")
    return "\n".join(out)


def build(source: Path, license_file: Path, out: Path, version: str, commit: str) -> Path:
    pyproject = tomllib.loads((source / "pyproject.toml").read_text())
    project = pyproject["project"]
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise SystemExit(f"--commit {commit!r} is not a full commit hash")
    name = project["name"].replace("-", "_")
    dist_info = f"{name}-{version}.dist-info"
    urls = pyproject["tool"]["hatch"]["metadata"]["hooks"]["vcs"]["urls"]
    readme = (source / project["readme"]).read_text()
    files: dict[str, bytes] = {}
    for path in sorted((source / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(source).as_posix()] = path.read_bytes()
    files[f"{dist_info}/METADATA"] = metadata(project, version, commit, readme, urls).encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: virtualtarget build_wheel.py\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{dist_info}/entry_points.txt"] = entry_points(project).encode()
    files[f"{dist_info}/licenses/LICENSE"] = license_file.read_bytes()
    record = [f"{member},{_record_hash(data)},{len(data)}" for member, data in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            info = zipfile.ZipInfo(member, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="python/packages/jumpstarter-driver-kubevirt")
    parser.add_argument("license", type=Path, help="the repository's LICENSE")
    parser.add_argument("out", type=Path, help="the folder the wheel goes to")
    parser.add_argument("--version", required=True)
    parser.add_argument("--commit", required=True)
    args = parser.parse_args(argv)
    print(build(args.source, args.license, args.out, args.version, args.commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
