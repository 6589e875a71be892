"""`virtualtarget crds`: regenerate models, CRDs and reference docs from `schemas/`.

`--check` writes nothing and fails when the committed output differs from what the
generator produces, which is how CI keeps `api/models/` and `crds/` honest.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codegen.fieldtree import SchemaDocError
from codegen.output import stale_files, write_files
from codegen.overlay import OverlayError
from codegen.pipeline import PARTS, generate

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="generate only this part (repeatable)"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; fail if output is stale"
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="project root (default: .)")


def run(args: argparse.Namespace) -> int:
    parts = tuple(args.only or PARTS)
    try:
        out = generate(args.root, parts)
    except (SchemaDocError, OverlayError) as exc:
        print(f"crds: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"crds: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    for notice in out.notices:
        print(f"crds: skipped: {notice}", file=sys.stderr)
    for report in out.reports:
        print(f"crds: {report}")
    if args.check:
        stale = stale_files(args.root, out.files)
        for rel in stale:
            print(
                f"crds: {rel} differs from the generator's output; run `make crds`", file=sys.stderr
            )
        return 1 if stale else 0
    written = write_files(args.root, out.files)
    print(
        f"crds: {len(out.files)} files, {len(written)} written, "
        f"{len(out.files) - len(written)} unchanged"
    )
    return 0
