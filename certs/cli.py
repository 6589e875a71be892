"""`virtualtarget certs`: create or renew the webhook's CA and serving certificate.

Safe to run again at any time (from cron, CI or by hand): it keeps what is valid,
renews the serving certificate within 30 days of expiry or when its names change, and
prints one line per decision. With `--kustomize-overlay` it also writes the CA bundle
into that overlay's webhook configurations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from certs.authority import CA_LIFETIME, SERVING_LIFETIME, ensure_certificates
from certs.overlay import write_ca_bundle

__all__ = ["configure", "run"]


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of days: {text!r}") from None
    if not 1 <= days <= CA_LIFETIME.days:
        raise argparse.ArgumentTypeError(f"must be between 1 and {CA_LIFETIME.days}")
    return days


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="folder for ca.crt, ca.key, tls.crt, tls.key",
    )
    parser.add_argument("--service", required=True, metavar="NAME", help="the webhook Service name")
    parser.add_argument(
        "--namespace", required=True, metavar="NS", help="the webhook Service namespace"
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="H",
        help="an extra DNS name or IP address (repeatable), e.g. 127.0.0.1",
    )
    parser.add_argument(
        "--days",
        type=_days,
        default=SERVING_LIFETIME.days,
        help=f"serving certificate lifetime (default {SERVING_LIFETIME.days})",
    )
    parser.add_argument(
        "--kustomize-overlay",
        type=Path,
        metavar="PATH",
        help="write the CA bundle into this overlay (deploy/overlays/self-signed)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        made = ensure_certificates(
            args.out, args.service, args.namespace, args.host, days=args.days
        )
        for action in made.actions:
            print(f"certs: {action}")
        if args.kustomize_overlay is not None:
            path = write_ca_bundle(args.kustomize_overlay, made.ca_pem)
            print(f"certs: wrote the CA bundle to {path}")
    except OSError as err:
        print(f"certs: {err.strerror or err}: {err.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    return 0
