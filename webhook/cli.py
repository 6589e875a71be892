"""`virtualtarget webhook`: serve the admission webhooks over TLS.

With `--kubeconfig`, or inside a cluster, cross-object checks read a watch-fed cache;
otherwise every single-object check and default still runs and each validation answer
carries one warning that the cross-object checks were skipped.
"""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys
from pathlib import Path

from api.imagepolicy import ImagePolicy, add_flags, from_flags, startup_line
from scrape.auth import Answer, ScrapeAuth
from scrape.kubeclient import poster
from scrape.serving import SERVING_WEBHOOK
from webhook.admission import Admission
from webhook.app import MetricsAuth, create_app
from webhook.cache import ClusterCache
from webhook.clusterview import ClusterView
from webhook.schemas import crd_schema
from webhook.server import bind, tls_reloader
from webhook.server import run as run_server

__all__ = ["configure", "run", "server_admission"]

log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cert-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="holds tls.crt and tls.key (reloaded when they change)",
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: 0.0.0.0)")
    parser.add_argument("--port", type=int, default=9443, help="port to listen on (default: 9443)")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="PATH",
        help="cluster access for cross-object checks (default: in-cluster, else none)",
    )
    parser.add_argument(
        "--client-ca",
        type=Path,
        metavar="PATH",
        help="require client certificates signed by this CA",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    add_flags(parser)


def _cluster(kubeconfig: Path | None) -> ClusterCache | None:
    from kubernetes import client, config

    configuration = client.Configuration()
    if kubeconfig is not None:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
    else:
        return None
    return ClusterCache(client.ApiClient(configuration))


def _fail(message: str) -> int:
    print(f"virtualtarget webhook: {message}", file=sys.stderr)
    return 2


def server_admission(
    view: ClusterView | None, image_policy: ImagePolicy | None = None
) -> Admission:
    """The admission the server runs: behind kube-apiserver, which has checked the CRD
    schema (types and the rule table's CEL) before any validating webhook is called."""
    return Admission(crd_schema, view, schema_enforced_upstream=True, image_policy=image_policy)


def _metrics_auth(cache: ClusterCache | None) -> MetricsAuth:
    """Scrapes reviewed by the apiserver; without cluster access nobody can be reviewed."""
    if cache is None:
        return lambda _header: Answer(403, "Forbidden: no cluster access to review the caller")
    return ScrapeAuth(poster(cache.api_client)).check


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        image_policy = from_flags(args)
    except ValueError as exc:
        return _fail(f"--allowed-image-prefixes: {exc}")
    log.log(*startup_line(image_policy))
    try:
        reloader = tls_reloader(args.cert_dir, args.client_ca)
        context = reloader.serving_context()
    except (OSError, ssl.SSLError) as exc:
        return _fail(f"cannot load the serving certificate: {exc}")
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        return _fail(f"{args.kubeconfig}: kubeconfig not found")
    try:
        cache = _cluster(args.kubeconfig)
    except Exception as exc:  # the kubernetes loader raises several types
        return _fail(f"cannot load cluster configuration from {args.kubeconfig}: {exc}")
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    view: ClusterView | None = cache
    if cache is not None:
        cache.start()
    app = create_app(
        server_admission(view, image_policy),
        ready=cache.synced if cache else lambda: True,
        metrics_auth=_metrics_auth(cache),
        certificate_expiry=lambda: reloader.expires_at,
    )
    mode = (
        "cross-object checks via the cluster"
        if cache
        else "no cluster: cross-object checks skipped"
    )
    host, port = sock.getsockname()[:2]

    def started() -> None:
        print(SERVING_WEBHOOK % (host, port, mode), flush=True)

    try:
        run_server(app, sock, context, started)
    except KeyboardInterrupt:
        pass
    finally:
        if cache is not None:
            cache.stop()
    return 0
