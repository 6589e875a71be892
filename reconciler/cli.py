"""`virtualtarget reconcile`: run the ExporterSet pool reconciler against a cluster.

Leader election is on by default (a coordination Lease), so several replicas can run
and only one reconciles. SIGTERM or SIGINT finishes the passes in flight, releases the
Lease and exits 0; losing the Lease exits 1 so the supervisor restarts the process.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType

__all__ = ["DEFAULT_PROVISIONER", "configure", "run"]

DEFAULT_PROVISIONER = "qemu.jumpstarter.dev"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument(
        "--provisioner",
        default=DEFAULT_PROVISIONER,
        help="handle only sets whose class names this provisioner (default: %(default)s)",
    )
    parser.add_argument("--namespace", help="watch only this namespace (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="sets reconciled in parallel")
    parser.add_argument(
        "--no-leader-election", action="store_true", help="reconcile without a leader Lease"
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the leader Lease (default: $POD_NAMESPACE or default)",
    )
    parser.add_argument("--leader-election-id", default="exporterset-reconciler")
    parser.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    parser.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS")
    parser.add_argument("-v", "--verbose", action="store_true")


def _fail(message: str) -> int:
    print(f"reconcile: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from reconciler.controller import Controller
    from reconciler.kube import ConfigError, Kube, api_client
    from reconciler.leader import ElectionConfig, Elector
    from reconciler.provisioners import provisioner

    try:
        plugin = provisioner(args.provisioner)
    except KeyError as exc:
        return _fail(str(exc.args[0]))
    try:
        kube = Kube(api_client(args.kubeconfig))
    except ConfigError as exc:
        return _fail(str(exc))
    stop = threading.Event()
    lost = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    elector = None
    if not args.no_leader_election:
        elector = Elector(
            kube,
            ElectionConfig(
                namespace=args.leader_election_namespace,
                name=args.leader_election_id,
                identity=os.environ.get("POD_NAME", ""),
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
            ),
        )

        def lose() -> None:
            lost.set()
            stop.set()

        threading.Thread(target=elector.run, args=(stop, lose), daemon=True).start()
        logging.getLogger(__name__).info("waiting for leadership as %s", elector.identity)
        while not elector.leading.wait(0.2):
            if stop.is_set():
                return 0
    controller = Controller(kube, plugin, namespace=args.namespace, workers=args.workers)
    try:
        controller.run(stop)
    finally:
        if elector is not None and not lost.is_set():
            elector.release()
    return 1 if lost.is_set() else 0
