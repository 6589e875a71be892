"""Install scopes: how a scope is chosen, what the caches of each read, and the command
line of Jumpstarter's operator (`exporter-set-controller`)."""

from __future__ import annotations

import argparse
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from api.access import CLUSTER, NAMESPACED
from pool.model.access import EXPORTERS, SECRETS
from pool.rendering.provisioners import PROVISIONERS, provisioner
from reconciler import cli
from reconciler.cli import election_namespace
from reconciler.exporter_set_controller import main as controller_main
from reconciler.exporter_set_controller import reconcile_args
from reconciler.runtime.cache import Informer
from reconciler.runtime.controller import Controller
from reconciler.runtime.leader import default_identity, election_id
from reconciler.runtime.memory import MemoryLeases, lease_name
from reconciler.runtime.named import NamedCache
from reconciler.runtime.scope import Scope


def test_scope_from_flags_then_namespace_env_then_the_cluster() -> None:
    assert Scope.from_args(["a,b", "c", "a"], {}) == Scope(("a", "b", "c"))
    assert Scope.from_args(None, {"NAMESPACE": "lab"}) == Scope(("lab",))
    assert Scope.from_args(["x"], {"NAMESPACE": "lab"}) == Scope(("x",))
    assert Scope.from_args(None, {}) == Scope()
    assert Scope().mode == CLUSTER and Scope(("a",)).mode == NAMESPACED
    assert Scope(("a",)).allows("a") and not Scope(("a",)).allows("b") and Scope().allows("z")
    with pytest.raises(ValueError, match="not a namespace name"):
        Scope.from_args(["Bad_Name"], {})


def test_the_leader_lease_lives_where_the_install_keeps_it(monkeypatch: Any) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert election_namespace("given", Scope(("lab",))) == "given"
    assert election_namespace(None, Scope(("lab",))) == "lab"
    assert election_namespace(None, Scope(("a", "b"))) == "default"
    monkeypatch.setenv("POD_NAMESPACE", "virtualtarget-system")
    assert election_namespace(None, Scope(("lab",))) == "virtualtarget-system"


def _lease_of(kubeconfig: Path, *flags: str) -> str:
    """The election Lease `virtualtarget reconcile FLAGS` takes (its elector's and its
    metrics' name), built but not run."""
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    built = cli.build(parser.parse_args([f"--kubeconfig={kubeconfig}", *flags]))
    assert not isinstance(built, str) and built.elector is not None, built
    assert built.metrics.lease_name == built.elector.config.name
    return built.elector.config.name


def test_each_provisioner_elects_on_its_own_lease_and_qemu_keeps_its_name(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    leases = {p: _lease_of(kubeconfig, f"--provisioner={p}") for p in PROVISIONERS}
    # Two reconcilers of different provisioners in one namespace never stand each other by.
    assert len(set(leases.values())) == len(leases)
    # QEMU's as before (an upgrade's new replicas wait for the old leader); the others'
    # is the Lease Jumpstarter's controller of that provisioner takes.
    assert leases["qemu.jumpstarter.dev"] == "exporterset-reconciler"
    kubevirt = "kubevirt.jumpstarter.dev"
    assert leases[kubevirt] == f"exporter-set-controller-{kubevirt}" == election_id(kubevirt)
    _, under_operator = reconcile_args([f"--provisioner={kubevirt}", "--leader-elect"], "lab")
    assert under_operator.leader_election_id == election_id(kubevirt)
    given = ("--provisioner=kubevirt.jumpstarter.dev", "--leader-election-id=mine")
    assert _lease_of(kubeconfig, *given) == "mine"


def _controller(scope: Scope) -> Controller:
    from bench.reconciler import CountingKube

    return Controller(CountingKube(), provisioner("qemu.jumpstarter.dev"), scope=scope)  # type: ignore[arg-type]


def test_the_candidate_is_named_as_controller_runtime_names_it() -> None:
    """`<hostname>_<uuid>` (`leaderelection.NewResourceLock`): Jumpstarter's controller and
    this one write the same shape of `holderIdentity` into the election Lease."""
    host, _, suffix = default_identity().rpartition("_")
    assert host == socket.gethostname()
    assert str(uuid.UUID(suffix)) == suffix
    assert default_identity() != default_identity()


def test_cluster_wide_secrets_are_read_by_name_namespaced_ones_watched() -> None:
    cluster = _controller(Scope())
    assert isinstance(cluster.secrets, NamedCache) and SECRETS not in cluster.watches
    assert cluster.memory is None  # the set's annotations hold the pool's memory
    listed = _controller(Scope(("a", "b")))
    assert isinstance(listed.secrets, Informer) and listed.secrets.streams == ("a", "b")
    assert listed.watches[EXPORTERS].streams == ("a", "b")
    assert isinstance(listed.memory, MemoryLeases)


def test_informer_relist_of_one_namespace_keeps_the_others() -> None:
    informer = Informer(None, SECRETS, namespaces=("a", "b"))  # type: ignore[arg-type]
    for namespace in ("a", "b"):
        informer.apply("ADDED", {"metadata": {"name": "s", "namespace": namespace}})
    informer.replace([], "a")
    assert informer.get("a", "s") is None and informer.get("b", "s") is not None
    informer._mark_synced("a")
    assert not informer.synced.is_set()
    informer._mark_synced("b")
    assert informer.synced.is_set()


def test_surplus_lease_names_fit_the_api() -> None:
    assert lease_name("pool") == "surplus-since.pool"
    long = lease_name("x" * 253)
    assert len(long) == 253 and long != lease_name("x" * 252 + "y")


OPERATOR = [
    "--provisioner=qemu.jumpstarter.dev",
    "--leader-elect",
    "--health-probe-bind-address=:8081",
    "--metrics-bind-address=0",
]


def test_the_operators_arguments_mean_a_one_namespace_reconciler(monkeypatch: Any) -> None:
    monkeypatch.setenv("KUBECONFIG", "/etc/kube/config")
    ours, args = reconcile_args([*OPERATOR, "--zap-log-level=debug"], "jumpstarter-lab")
    assert args.provisioner == "qemu.jumpstarter.dev"
    assert args.namespace == ["jumpstarter-lab"]
    assert args.leader_election_namespace == "jumpstarter-lab"
    assert args.leader_election_id == "exporter-set-controller-qemu.jumpstarter.dev"
    assert not args.no_leader_election
    assert args.health_probe_bind_address == ":8081" and args.metrics_bind_address == "0"
    assert args.kubeconfig == "/etc/kube/config"
    assert ours.zap_log_level == 10
    _, args = reconcile_args(["--provisioner=p", "--leader-elect=false"], "ns")
    assert args.no_leader_election
    assert args.metrics_bind_address == "0"  # its default, as Jumpstarter's
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    _, args = reconcile_args(
        ["--provisioner=p", "--zap-log-level=3", "--zap-encoder=console"], "ns"
    )
    assert args.kubeconfig is None  # in-cluster configuration


def test_the_command_refuses_what_jumpstarters_refuses(monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.delenv("NAMESPACE", raising=False)
    assert controller_main(OPERATOR) == 1
    assert "NAMESPACE environment variable is required" in capsys.readouterr().err
    monkeypatch.setenv("NAMESPACE", "lab")
    assert controller_main(["--leader-elect"]) == 1
    assert "--provisioner is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reconcile_args(["--provisioner=p", "--zap-log-level=loud"], "lab")


def test_zap_time_encodings() -> None:
    from reconciler.cli import _timestamp

    moment = 1764547200.5  # 2025-12-01T00:00:00.5Z
    assert _timestamp(moment, "epoch") == moment
    assert _timestamp(moment, "millis") == moment * 1000
    assert _timestamp(moment, "nano") == 1764547200500000000
    assert _timestamp(moment, "iso8601") == "2025-12-01T00:00:00.500Z"
    assert _timestamp(moment, "rfc3339") == "2025-12-01T00:00:00Z"
    assert _timestamp(moment, "rfc3339nano") == "2025-12-01T00:00:00.500000Z"
