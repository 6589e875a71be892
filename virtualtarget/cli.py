"""`virtualtarget`: one entry point, one subcommand per job.

Each subcommand lives in the package that owns the job and exposes two functions,
`configure(parser)` and `run(args) -> int`. They are imported only when chosen, so
`virtualtarget crds` never pays for importing the webhook or the Kubernetes client.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["SUBCOMMANDS", "main"]

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "crds": ("codegen.cli", "regenerate api/ models, crds/ and docs from schemas/"),
    "webhook": ("webhook.cli", "serve the mutating and validating admission webhooks over TLS"),
    "validate": ("webhook.validate_cli", "default and validate manifests offline"),
    "certs": ("certs.cli", "create or renew the webhook CA and serving certificate"),
    "reconcile": ("reconciler.cli", "run the ExporterSet pool reconciler"),
    "plan": ("reconciler.plan_cli", "show what the reconciler would do now to each pool, and why"),
    "simulate": ("reconciler.simulate_cli", "replay a lease-demand trace through the planner"),
}


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="virtualtarget", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in SUBCOMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).configure(child)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _parser_for(args_list)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    result: int = importlib.import_module(SUBCOMMANDS[args.command][0]).run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
