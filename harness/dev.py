"""`python -m harness.dev` (what `make run` starts): the whole product on loopback.

Starts etcd and kube-apiserver, installs the CRDs, serves the webhook over TLS and
registers it from the rendered deploy manifests, starts the reconciler, prints how to
use it, and stops everything in order on Ctrl-C (or SIGTERM).

There is no Jumpstarter here, so a development stand-in plays its controller's
credential step (`harness.standin`): without it no instance would get a config
Secret or a Pod. It is never part of the deploy manifests.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from harness.controlplane import REPO_ROOT, ControlPlaneError, running_control_plane
from harness.entry import run_job
from harness.stack import (
    ReconcilerProcess,
    register_webhooks,
    running_reconciler,
    running_webhook,
)
from harness.standin import CredentialStandIn

__all__ = ["configure", "run"]

DEFAULT_WORKDIR = REPO_ROOT / ".run"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="folder for the cluster state, certificates and logs (wiped at start)",
    )
    parser.add_argument(
        "--no-reconciler", action="store_true", help="serve admission only, do not run the pools"
    )


def _usage(kubeconfig: Path, workdir: Path, reconciler: ReconcilerProcess | None = None) -> str:
    examples = REPO_ROOT / "examples"
    endpoints = (
        [
            f"  curl {reconciler.health_url}/readyz",
            f"  curl -k -H \"Authorization: Bearer $(awk '/token:/{{print $2}}' {kubeconfig})\" "
            f"{reconciler.metrics_url}/metrics   # the admin's token may read them",
        ]
        if reconciler is not None
        else []
    )
    return "\n".join(
        [
            f"control plane ready; logs in {workdir}",
            "",
            f"  export KUBECONFIG={kubeconfig}",
            f"  kubectl apply -f {examples / 'virtualtargetclass-qemu.yaml'} "
            f"-f {examples / 'exporterset-qemu.yaml'}",
            "  kubectl get exportersets,exporters,secrets,pods -o wide",
            f"  kubectl apply -f {examples / 'invalid'}/   # each one is rejected, with reasons",
            *endpoints,
            "",
            "Ctrl-C stops everything.",
        ]
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    workdir: Path = args.workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    stop = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with (
            running_control_plane(workdir / "control-plane") as plane,
            running_webhook(plane, workdir) as webhook,
        ):
            register_webhooks(plane, webhook)
            if args.no_reconciler:
                print(_usage(plane.kubeconfig, workdir), flush=True)
                stop.wait()
            else:
                standin = CredentialStandIn(plane.api_client())
                threading.Thread(target=standin.run, args=(stop,), daemon=True).start()
                print(
                    "dev stand-in for Jumpstarter's controller: issuing Exporter credentials "
                    "(development only, never deployed)",
                    flush=True,
                )
                with running_reconciler(plane, workdir) as reconciler:
                    print(_usage(plane.kubeconfig, workdir, reconciler), flush=True)
                    while not stop.wait(1.0):
                        reconciler.check_alive()
            print("stopping", flush=True)
    except ControlPlaneError as error:
        print(f"harness.dev: {error}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(
        "python -m harness.dev",
        "start a loopback control plane with webhook and reconciler",
        configure,
        run,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
