"""`exporter-set-controller`: the reconciler under the command line of Jumpstarter's.

Jumpstarter's operator runs an exporter-set controller per provisioner as
`/exporter-set-controller --provisioner=<name> --leader-elect
--health-probe-bind-address=:8081 --metrics-bind-address=0` with `NAMESPACE` set to
its Pod's namespace, under a Role in that namespace. This command takes those flags as
that program does (Go's flag syntax: `--flag=value`, `--flag value`, a bool flag alone or
`=true`/`=false`), with its defaults, plus the logging flags controller-runtime binds
(`--zap-log-level`, `--zap-encoder`, `--zap-devel`, `--zap-stacktrace-level`,
`--zap-time-encoding`) and `--kubeconfig`, and runs `virtualtarget reconcile` with:

- the scope: only `NAMESPACE` (required, as there): caches, writes, the leader Lease;
- the leader election ID `exporter-set-controller-<provisioner>` in `NAMESPACE`
  (`reconciler.runtime.leader.election_id`), so this controller and Jumpstarter's for the
  same provisioner never lead at once (both take the same coordination Lease);
- the cluster: `--kubeconfig`, else `$KUBECONFIG`, else the in-cluster configuration,
  else `~/.kube/config`, as controller-runtime looks for it;
- the QEMU layout Jumpstarter main renders (`--qemu-layout=sidecar`): the operator that
  runs this command exists only with Jumpstarter main, so a class written for it renders
  as it does there unless its parameters name another `layout`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from api.provisioners.qemu import Layout
from reconciler import cli
from reconciler.runtime.leader import election_id
from reconciler.runtime.scope import NAMESPACE_ENV

__all__ = ["main", "reconcile_args"]

# controller-runtime's zap flags: the levels `--zap-log-level` names (or an integer > 0,
# a debug verbosity), and the values of the others.
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "error": logging.ERROR}
_STACKTRACE_LEVELS = ("info", "error", "panic")
_TIME_ENCODINGS = ("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")
_ENCODERS = ("json", "console")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _go_bool(value: str) -> bool:
    """A bool flag's value as Go's strconv.ParseBool reads it."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {value!r}")


def _level(value: str) -> int:
    if value in _LEVELS:
        return _LEVELS[value]
    if value.isdigit() and int(value) > 0:
        return logging.DEBUG  # a verbosity above info
    raise argparse.ArgumentTypeError(
        f"invalid log level {value!r} (debug, info, error, or an integer > 0)"
    )


def _choice(choices: Sequence[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="exporter-set-controller",
        description="Reconcile the ExporterSets of one provisioner in $NAMESPACE "
        "(Jumpstarter's exporter-set controller command line).",
    )
    parser.add_argument(
        "--provisioner", default="", help="the provisioner handled, e.g. qemu.jumpstarter.dev"
    )
    for flag, what in (("--leader-elect", "leader election"), ("--zap-devel", "debug logging")):
        parser.add_argument(
            flag, nargs="?", const=True, default=False, type=_go_bool, help=f"enable {what}"
        )
    parser.add_argument(
        "--health-probe-bind-address", default=":8081", help="/healthz and /readyz (plain HTTP)"
    )
    parser.add_argument(
        "--metrics-bind-address", default="0", help="/metrics over HTTPS; 0 disables (default)"
    )
    parser.add_argument("--kubeconfig", default="", help="kubeconfig file")
    parser.add_argument("--zap-encoder", type=_choice(_ENCODERS), help="json or console")
    parser.add_argument("--zap-log-level", type=_level, help="debug, info, error or an integer")
    parser.add_argument("--zap-stacktrace-level", type=_choice(_STACKTRACE_LEVELS))
    parser.add_argument("--zap-time-encoding", type=_choice(_TIME_ENCODINGS))
    return parser


def _kubeconfig(flag: str) -> str | None:
    """The kubeconfig to load, None for the in-cluster configuration."""
    if flag:
        return flag
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    home = Path.home() / ".kube" / "config"
    return str(home) if home.is_file() else None


def reconcile_args(
    argv: Sequence[str], namespace: str
) -> tuple[argparse.Namespace, argparse.Namespace]:
    """(this command's flags, the `virtualtarget reconcile` arguments they mean)."""
    ours = _parser().parse_args(list(argv))
    if not ours.provisioner:
        raise ValueError("--provisioner is required")
    translated = [
        f"--provisioner={ours.provisioner}",
        f"--health-probe-bind-address={ours.health_probe_bind_address}",
        f"--metrics-bind-address={ours.metrics_bind_address}",
        f"--namespace={namespace}",
        f"--leader-election-namespace={namespace}",
        f"--leader-election-id={election_id(ours.provisioner)}",
        f"--qemu-layout={Layout.SIDECAR.value}",
    ]
    if not ours.leader_elect:
        translated.append("--no-leader-election")
    kubeconfig = _kubeconfig(ours.kubeconfig)
    if kubeconfig:
        translated.append(f"--kubeconfig={kubeconfig}")
    parser = argparse.ArgumentParser(prog="exporter-set-controller")
    cli.configure(parser)
    return ours, parser.parse_args(translated)


def main(argv: Sequence[str] | None = None) -> int:
    namespace = os.environ.get(NAMESPACE_ENV, "")
    try:
        ours, args = reconcile_args(sys.argv[1:] if argv is None else argv, namespace)
    except ValueError as exc:
        print(f"exporter-set-controller: {exc}", file=sys.stderr)
        return 1
    if not namespace:
        print(
            f"exporter-set-controller: the {NAMESPACE_ENV} environment variable is required "
            "(the namespace whose ExporterSets it reconciles)",
            file=sys.stderr,
        )
        return 1
    level = ours.zap_log_level or (logging.DEBUG if ours.zap_devel else logging.INFO)
    encoder = ours.zap_encoder or ("console" if ours.zap_devel else "json")
    cli.setup_logging(
        level, json_lines=encoder == "json", time_encoding=ours.zap_time_encoding or "epoch"
    )
    args.logging_set = True
    return cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
