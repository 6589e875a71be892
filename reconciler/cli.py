"""`virtualtarget reconcile`: run the ExporterSet pool reconciler against a cluster.

Leader election is on by default (a coordination Lease), so several replicas can run
and only one reconciles; every replica fills its caches at once, so a standby is ready
and takes over from warm caches. SIGTERM or SIGINT finishes the passes in flight,
releases the Lease and exits 0; losing the Lease exits 1 so the supervisor restarts the
process.

Endpoints, named like controller-runtime's flags: `--health-probe-bind-address` serves
`/healthz` (fails when a list-and-watch loop has not heard from the apiserver for
`WATCH_STALL_BOUND` seconds) and `/readyz` (passes once the caches are filled) over
plain HTTP; `--metrics-bind-address` serves `/metrics` over HTTPS to callers the
apiserver authenticates and authorizes for `GET /metrics` (`scrape.auth`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import ssl
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from api.imagepolicy import add_flags, from_flags, startup_line
from api.provisioners.qemu import Layout
from reconciler.runtime.named import DEFAULT_BUDGET, DEFAULT_RESYNC
from scrape.http import TEXT, Reply, Route, Server, parse_address
from scrape.http import serve as serve_routes
from scrape.serving import SERVING_METRICS, SERVING_PROBES

if TYPE_CHECKING:
    from reconciler.runtime.controller import Controller
    from reconciler.runtime.kube import Kube
    from reconciler.runtime.leader import Elector
    from reconciler.runtime.metrics import ReconcilerMetrics
    from reconciler.runtime.scope import Scope

__all__ = [
    "DEFAULT_PROVISIONER",
    "WATCH_STALL_BOUND",
    "Reconciler",
    "build",
    "configure",
    "election_lease",
    "lead",
    "run",
    "serve",
]

DEFAULT_PROVISIONER = "qemu.jumpstarter.dev"
# A watch ends after at most 240 s by the server's clock and bookmarks arrive about once
# a minute: a loop that heard nothing for this long has stopped.
WATCH_STALL_BOUND = 300.0


def configure(parser: argparse.ArgumentParser) -> None:
    """`virtualtarget reconcile`'s flags, in the order `--help` lists them."""
    _pool_flags(parser)
    _election_flags(parser)
    _serving_flags(parser)
    add_flags(parser)
    parser.add_argument("-v", "--verbose", action="store_true")


def _pool_flags(parser: argparse.ArgumentParser) -> None:
    """The cluster, the pools handled, how their Secrets are read, the workers."""
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument(
        "--provisioner",
        default=DEFAULT_PROVISIONER,
        help="handle only sets whose class names this provisioner (default: %(default)s)",
    )
    parser.add_argument(
        "--qemu-layout",
        choices=[layout.value for layout in Layout],
        default=Layout.EXPORTER.value,
        help="where QEMU runs in the Pods of pools whose parameters name no `layout`: "
        "exporter (Jumpstarter 0.9.0's driver, in the exporter's container) or sidecar "
        "(Jumpstarter main's runtime sidecar; exporter-set-controller's default) "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--namespace",
        action="append",
        metavar="NS[,NS...]",
        help="watch pools only in these namespaces (repeat or comma-separate; default: "
        "$NAMESPACE, else every namespace)",
    )
    parser.add_argument(
        "--secret-resync",
        type=float,
        default=DEFAULT_RESYNC,
        metavar="SECONDS",
        help="watching every namespace, the Secrets read by name are also read again in a "
        "slow safety resync, none more often than this (default: %(default)s)",
    )
    parser.add_argument(
        "--secret-resync-budget",
        type=_positive,
        default=DEFAULT_BUDGET,
        metavar="READS_PER_SECOND",
        help="the safety resync's reads a second over all those Secrets together: each is "
        "read again every max(--secret-resync, Secrets / budget) seconds "
        "(default: %(default)s)",
    )
    # A pass mostly waits on the apiserver (its writes), so passes overlap well: with 100
    # pools leased at once, 4 workers refilled in 0.5 s at the median where 2 took 1 s.
    parser.add_argument(
        "--workers", type=int, default=4, help="sets reconciled in parallel (default: 4)"
    )


def _election_flags(parser: argparse.ArgumentParser) -> None:
    """Leader election: one replica reconciles, the others stand by with warm caches."""
    parser.add_argument(
        "--no-leader-election", action="store_true", help="reconcile without a leader Lease"
    )
    parser.add_argument(
        "--leader-election-namespace",
        help="namespace of the leader Lease (default: $POD_NAMESPACE, else the one namespace "
        "watched, else default)",
    )
    parser.add_argument(
        "--leader-election-id",
        metavar="ID",
        help="name of the leader Lease (default: exporterset-reconciler for "
        "qemu.jumpstarter.dev, else exporter-set-controller-<provisioner>)",
    )
    parser.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    parser.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS")


def _serving_flags(parser: argparse.ArgumentParser) -> None:
    """Where `/metrics` and the probes are served."""
    parser.add_argument(
        "--metrics-bind-address",
        default=":8443",
        metavar="[HOST]:PORT",
        help="serve /metrics here (default: %(default)s; 0 disables)",
    )
    parser.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="HTTPS, and only for callers allowed to GET /metrics (default: on)",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        type=Path,
        metavar="DIR",
        help="tls.crt and tls.key for /metrics (default: a self-signed certificate)",
    )
    parser.add_argument(
        "--health-probe-bind-address",
        default=":8081",
        metavar="[HOST]:PORT",
        help="serve /healthz and /readyz here, plain HTTP (default: %(default)s; 0 disables)",
    )


def _positive(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {value}")
    return number


def _fail(message: str) -> int:
    print(f"reconcile: {message}", file=sys.stderr)
    return 2


def _probes(controller: Controller) -> dict[str, Route]:
    def healthz(_headers: Mapping[str, str]) -> Reply:
        stalled = controller.stalled(WATCH_STALL_BOUND)
        if stalled:
            return 500, TEXT, f"watch stalled: {', '.join(stalled)}\n".encode()
        return 200, TEXT, b"ok\n"

    def readyz(_headers: Mapping[str, str]) -> Reply:
        if controller.synced():
            return 200, TEXT, b"ok\n"
        return 503, TEXT, b"caches not synced\n"

    return {"/healthz": healthz, "/readyz": readyz}


def _metrics_route(exposition: Callable[[], bytes], kube: Kube, secure: bool) -> Route:
    from prometheus_client import CONTENT_TYPE_LATEST

    from pool.model.access import REVIEWS
    from scrape.auth import ScrapeAuth

    auth = ScrapeAuth(lambda path, body: kube.review(REVIEWS[path], body)) if secure else None

    def metrics(headers: Mapping[str, str]) -> Reply:
        if auth is not None:
            answer = auth.check(headers.get("Authorization") or headers.get("authorization"))
            if not answer.allowed:
                return answer.status, TEXT, (answer.message + "\n").encode()
        return 200, CONTENT_TYPE_LATEST, exposition()

    return metrics


def _metrics_tls(cert_dir: Path | None) -> ssl.SSLContext:
    """The given certificate (reloaded on rotation), else a self-signed one made now, as
    controller-runtime's secure metrics do without a certificate."""
    from certs.authority import ensure_certificates
    from certs.reload import CertificateReloader

    if cert_dir is None:
        cert_dir = Path(tempfile.mkdtemp(prefix="virtualtarget-metrics-"))
        namespace = os.environ.get("POD_NAMESPACE", "default")
        ensure_certificates(cert_dir, "virtualtarget-reconciler-metrics", namespace)
    return CertificateReloader(cert_dir).serving_context()


def election_namespace(explicit: str | None, scope: Scope) -> str:
    """Where the leader Lease lives: as given, else the Pod's namespace, else the one
    namespace watched (a one-namespace install keeps everything there), else default."""
    if explicit:
        return explicit
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if scope.namespaces is not None and len(scope.namespaces) == 1:
        return scope.namespaces[0]
    return "default"


def election_lease(args: argparse.Namespace) -> str:
    """The name of the leader Lease: as given, else its provisioner's default."""
    from reconciler.runtime.leader import default_election_id

    return str(args.leader_election_id or default_election_id(args.provisioner))


def _timestamp(created: float, encoding: str) -> float | int | str:
    """A record's time as zap's time encoders write it (`--zap-time-encoding`)."""
    from datetime import UTC, datetime

    if encoding == "millis":
        return created * 1000
    if encoding == "nano":
        return int(created * 1_000_000_000)
    moment = datetime.fromtimestamp(created, UTC)
    if encoding == "iso8601":
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if encoding == "rfc3339":
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if encoding == "rfc3339nano":
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return created  # epoch: seconds, zap's production default


def setup_logging(level: int, json_lines: bool = False, time_encoding: str = "epoch") -> None:
    """Lines with time, level and logger; `json_lines` one JSON object per line (the
    zap encoder `json` of controller-runtime's flags), its time in `time_encoding`."""
    handler = logging.StreamHandler()
    if json_lines:
        import json

        class Json(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                entry = {
                    "ts": _timestamp(record.created, time_encoding),
                    "level": record.levelname.lower(),
                    "logger": record.name,
                    "msg": record.getMessage(),
                }
                if record.exc_info:
                    entry["stacktrace"] = self.formatException(record.exc_info)
                return json.dumps(entry)

        handler.setFormatter(Json())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def _addresses(args: argparse.Namespace) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    return parse_address(args.metrics_bind_address), parse_address(args.health_probe_bind_address)


@dataclass
class Reconciler:
    """What `run` builds from its arguments before it serves and leads."""

    kube: Kube
    controller: Controller
    elector: Elector | None  # None: reconcile without a leader Lease
    metrics: ReconcilerMetrics
    metrics_address: tuple[str, int] | None
    health_address: tuple[str, int] | None


def run(args: argparse.Namespace) -> int:
    """Build the reconciler, serve its probes and metrics, then reconcile while leading."""
    if not getattr(args, "logging_set", False):
        setup_logging(logging.DEBUG if args.verbose else logging.INFO)
    built = build(args)
    if isinstance(built, str):
        return _fail(built)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    servers = serve(args, built)
    if isinstance(servers, str):
        return _fail(servers)
    try:
        return lead(built, stop)
    finally:
        for server in servers:
            server.stop()


def build(args: argparse.Namespace) -> Reconciler | str:
    """The client, controller, elector and metrics the arguments ask for, or what is
    wrong with them."""
    from pool.rendering.provisioners import provisioner
    from reconciler.runtime.controller import Controller
    from reconciler.runtime.kube import ConfigError, Kube, api_client
    from reconciler.runtime.leader import ElectionConfig, Elector
    from reconciler.runtime.metrics import ReconcilerMetrics
    from reconciler.runtime.scope import Scope

    try:
        plugin = provisioner(args.provisioner, qemu_layout=args.qemu_layout)
    except KeyError as exc:
        return str(exc.args[0])
    try:
        scope = Scope.from_args(args.namespace)
    except ValueError as exc:
        return str(exc)
    lease_namespace = election_namespace(args.leader_election_namespace, scope)
    lease_name = election_lease(args)
    try:
        metrics_address, health_address = _addresses(args)
    except ValueError as exc:
        return str(exc)
    try:
        image_policy = from_flags(args)
    except ValueError as exc:
        return f"--allowed-image-prefixes: {exc}"
    try:
        client = api_client(args.kubeconfig)
    except ConfigError as exc:
        return str(exc)
    kube = Kube(client, mode=scope.mode)
    if scope.namespaces is not None:
        kube.write_namespaces = frozenset((*scope.namespaces, lease_namespace))
    controller = Controller(
        kube,
        plugin,
        workers=args.workers,
        image_policy=image_policy,
        scope=scope,
        secret_resync=args.secret_resync,
        secret_budget=args.secret_resync_budget,
    )
    elector = None
    if not args.no_leader_election:
        # Its own client: the Lease's renewals are the one write never held back.
        elector = Elector(
            Kube(client),
            ElectionConfig(
                namespace=lease_namespace,
                name=lease_name,
                identity=os.environ.get("POD_NAME", ""),
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
            ),
        )
        kube.may_write = elector.may_write
    metrics = ReconcilerMetrics(
        queue=controller.queue,
        reconciles=controller.reconciles,
        informers={r.plural: i for r, i in controller.informers.items()},
        kube=kube,
        plans=lambda: list(controller.plans.items()),
        leading=elector.leading.is_set if elector is not None else lambda: True,
        lease_name=lease_name,
        image_allow_list=image_policy is not None,
    )
    log = logging.getLogger(__name__)
    log.log(*startup_line(image_policy))
    how = "Secrets watched" if scope.namespaces is not None else "Secrets read by name"
    log.info("watching pools in %s (%s)", scope.describe(), how)
    return Reconciler(kube, controller, elector, metrics, metrics_address, health_address)


def serve(args: argparse.Namespace, built: Reconciler) -> list[Server] | str:
    """Serve the probes and `/metrics` (those not disabled); or why they cannot be."""
    log = logging.getLogger(__name__)
    servers: list[Server] = []
    try:
        if built.health_address is not None:
            servers.append(serve_routes(built.health_address, _probes(built.controller)))
            log.info(SERVING_PROBES, servers[-1].port)
        if built.metrics_address is not None:
            tls = _metrics_tls(args.metrics_cert_dir) if args.metrics_secure else None
            route = _metrics_route(built.metrics.exposition, built.kube, args.metrics_secure)
            servers.append(serve_routes(built.metrics_address, {"/metrics": route}, tls))
            log.info(SERVING_METRICS, servers[-1].port)
    except (OSError, ssl.SSLError) as exc:
        for server in servers:
            server.stop()
        return f"cannot serve probes or metrics: {exc}"
    return servers


def lead(built: Reconciler, stop: threading.Event) -> int:
    """Fill the caches, then reconcile while this process leads (or without election),
    until `stop`: 0, or 1 when the leader Lease was lost."""
    log = logging.getLogger(__name__)
    controller, elector = built.controller, built.elector
    lost = threading.Event()
    controller.start_caches(stop)
    if elector is not None:

        def lose() -> None:
            lost.set()
            stop.set()

        threading.Thread(target=elector.run, args=(stop, lose), daemon=True).start()
        log.info("waiting for leadership as %s", elector.identity)
        while not elector.leading.wait(0.2):
            if stop.is_set():
                return 0
    try:
        controller.run(stop)
    finally:
        if elector is not None and not lost.is_set():
            elector.release()
    return 1 if lost.is_set() else 0
