"""`python -m harness.dev` (what `make run` starts): the whole product on loopback.

Starts etcd and kube-apiserver, installs the CRDs, serves the webhook over TLS and
registers it from the rendered deploy manifests, starts the reconciler, prints how to
use it, and stops everything in order on Ctrl-C (or SIGTERM).

Jumpstarter's side: where the release's source is at hand (`../shared/vendor`, or the
tarball `JUMPSTARTER_SOURCE` names; `harness.jumpstarter_build` builds it once), its own
0.9.0 controller and router serve the namespace `--namespace` (it serves one only), as in
the tests; they need root, for their network namespace. Otherwise a development stand-in
plays the controller's credential step (`harness.standin`) in every namespace, so that
instances get their config Secret and Pod. The first line printed says which runs. Neither
is part of the deploy manifests.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

from harness.controlplane import (
    REPO_ROOT,
    ControlPlane,
    ControlPlaneError,
    running_control_plane,
)
from harness.entry import run_job
from harness.jumpstarter import running_jumpstarter
from harness.jumpstarter_build import RELEASE, JumpstarterBuildError, build, source_tarball
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
    parser.add_argument(
        "--namespace",
        default="default",
        help="the namespace Jumpstarter's controller serves, when its release runs",
    )
    parser.add_argument(
        "--standin",
        action="store_true",
        help="use the development stand-in even where Jumpstarter's release is at hand",
    )


def _usage(
    kubeconfig: Path,
    workdir: Path,
    reconciler: ReconcilerProcess | None = None,
    client: Path | None = None,
) -> str:
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
            *([f"  jmp get exporters --client-config {client}"] if client else []),
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
                with (
                    _jumpstarter_side(plane, workdir, args, stop) as (check_jumpstarter, client),
                    running_reconciler(plane, workdir) as reconciler,
                ):
                    print(_usage(plane.kubeconfig, workdir, reconciler, client), flush=True)
                    while not stop.wait(1.0):
                        reconciler.check_alive()
                        check_jumpstarter()
            print("stopping", flush=True)
    except (ControlPlaneError, JumpstarterBuildError) as error:
        print(f"harness.dev: {error}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _release_unavailable(args: argparse.Namespace) -> str:
    """Why Jumpstarter's release cannot run here, "" when it can."""
    if args.standin:
        return "--standin given"
    if not source_tarball().is_file():
        return f"no release source at {source_tarball()}"
    if os.geteuid() != 0:
        return "its network namespace needs root"
    return ""


@contextlib.contextmanager
def _jumpstarter_side(
    plane: ControlPlane, workdir: Path, args: argparse.Namespace, stop: threading.Event
) -> Iterator[tuple[Callable[[], None], Path | None]]:
    """Jumpstarter's release for `args.namespace` where it can run, else the stand-in;
    yields the check that it still runs, and the config of its Client `dev` (the release's
    own `jmp` uses it), None for the stand-in."""
    why_not = _release_unavailable(args)
    if why_not:
        print(
            f"dev stand-in for Jumpstarter's controller ({why_not}): issuing Exporter "
            "credentials (development only, never deployed)",
            flush=True,
        )
        standin = CredentialStandIn(plane.api_client())
        threading.Thread(target=standin.run, args=(stop,), daemon=True).start()
        yield (lambda: None), None
        return
    print(
        f"Jumpstarter {RELEASE}'s controller and router, from {source_tarball().name}", flush=True
    )
    build()
    namespace = args.namespace
    if plane.kubectl("get", "namespace", namespace, check=False).returncode != 0:
        plane.kubectl("create", "namespace", namespace)
    with running_jumpstarter(plane, namespace, workdir / "jumpstarter") as running:
        yield running.check_alive, running.client_config("dev")


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
