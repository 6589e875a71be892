"""deploy/ installed on a real node by docs/install.md's own commands (tests/node/install.py),
once for the module; each test checks one promise of the manifests on the running Pods.
The test that drains the node leaves the install as it found it; the last one uninstalls
it by the page's commands and finds nothing left."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.node import NodeCluster
from pool.model.reasons import WAITING_FOR_CREDENTIALS
from reconciler.runtime.leader import ElectionConfig
from scrape.settings import IMAGE_ALLOW_LIST_METRIC as ALLOW_LIST
from tests.census import Census
from tests.docpages import commands
from tests.e2e.examples import (
    CROSS_OBJECT_DENIAL,
    assert_examples_applied,
    assert_refused_by_its_rule,
    cross_object_case,
    in_namespace,
    rule_examples,
    write_examples,
)
from tests.e2e.objects import exporter_set, lease, virtual_target_class
from tests.installpage import EXAMPLES_APPLY, PAGE
from tests.node.install import (
    DEPLOYMENTS,
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    Install,
    figure,
    install,
)
from tests.node.support import apply, record_figure, wait_for_phase

# The install builds the image first: on a fresh clone (no debootstrap base, no layer
# cache) about 5 minutes, which the first test's setup would otherwise not be given.
pytestmark = pytest.mark.timeout(900)
# A cluster of its own: the install puts Jumpstarter's operator and the product, which serves
# the whole cluster, on it, and a drain evicts every Pod on the node.
OWN_NODE_CLUSTER = True

PROBE_FAILURE = "Unhealthy"  # the kubelet's Event reason for a failed probe
# A startup probe that fails is what it is for: it gives a slow start (a loaded machine)
# up to its failureThreshold before the liveness probe counts. Liveness and readiness
# failures are what a quiet start or stop must not show.
STARTUP_PROBE = "Startup probe failed"
ELECTION = ElectionConfig(namespace=NAMESPACE).name  # the reconciler's election Lease


def probe_failures(installed: Install) -> tuple[list[str], int]:
    """The liveness and readiness probe failures of the install, and how many startup
    probe failures there were (a figure)."""
    messages = [e["message"] for e in installed.events(PROBE_FAILURE)]
    startup = [m for m in messages if m.startswith(STARTUP_PROBE)]
    return [m for m in messages if not m.startswith(STARTUP_PROBE)], len(startup)


@pytest.fixture(scope="module")
def installed(
    node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Install]:
    done = install(node_cluster, tmp_path_factory.mktemp("install"))
    record_figure(figure("install by docs/install.md", done.installed))
    yield done


def _wait(what: str, probe: Any, timeout: float = 60.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(every)


def test_both_deployments_are_available_with_two_replicas_and_no_probe_fails(
    installed: Install,
) -> None:
    for name in DEPLOYMENTS:
        deployment = installed.json("get", "deployment", name, "-n", NAMESPACE)
        status = deployment["status"]
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        assert conditions["Available"] == "True", status
        assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (
            2,
            2,
            2,
        ), status
        pods = installed.pods(name)
        assert len(pods) == 2
        for pod in pods:
            (container,) = pod["status"]["containerStatuses"]
            assert container["ready"] and container["started"], container
            assert container["restartCount"] == 0, container
    # Quiet starts: no liveness or readiness probe failed while the four Pods started.
    failures, startup = probe_failures(installed)
    record_figure(f"probe-failure Events of the install: {len(failures)} (startup {startup})")
    assert failures == []


def test_the_page_s_examples_made_a_pool(installed: Install) -> None:
    documented = commands(PAGE, EXAMPLES_APPLY)
    (applied,) = [r for r in installed.installed if r.command in documented]
    assert applied.run == applied.command.text  # as written
    assert_examples_applied(applied, "default")
    pool = _wait("the examples' pool", lambda: _pool(installed, "default", "fedora-x86"))
    record_figure(f"the examples' pool: {len(pool)} Exporters (waiting for credentials)")


def test_both_are_admitted_under_the_restricted_pod_security_level(installed: Install) -> None:
    namespace = installed.json("get", "namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert sum(len(installed.pods(name)) for name in DEPLOYMENTS) == 4
    # Enforcement is on: a root Pod is refused there (server-side dry run).
    root = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root", "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "main", "image": installed.image}]},
    }
    refused = installed.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(root), check=False
    )
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr


def test_admission_goes_through_the_webhook_service(
    installed: Install, namespace: str, tmp_path: Path
) -> None:
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        for hook in installed.json("get", kind, WEBHOOK)["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] == WEBHOOK, hook["clientConfig"]
            assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
    # The same answers as the loopback tier (tests/e2e/examples.py, the one source).
    result = installed.kubectl("apply", "-f", str(write_examples(tmp_path, namespace)), check=False)
    assert_examples_applied(result, namespace)
    for path in rule_examples():
        refused = installed.kubectl(
            "apply", "-f", "-", input=in_namespace(path, namespace), check=False
        )
        assert_refused_by_its_rule(path, refused)
    # Only the webhook can give this one: it reads the class.
    lazy, warm = cross_object_case(namespace)
    installed.kubectl("apply", "-f", "-", input=json.dumps(lazy))
    denied = installed.kubectl("apply", "-f", "-", input=json.dumps(warm), check=False)
    assert (denied.returncode, denied.stderr) == (1, CROSS_OBJECT_DENIAL)


def _election(installed: Install) -> dict[str, Any]:
    leases = installed.json("get", "leases.coordination.k8s.io", "-n", NAMESPACE)["items"]
    (lease,) = [le for le in leases if le["metadata"]["name"] == ELECTION]
    return lease


def _holders_since(installed: Install, version: str) -> list[str]:
    """The election Lease's holder at each write after `version` ("" where one released
    it), by a watch from that version: the apiserver replays every write since."""
    from kubernetes import client, watch

    api = client.CoordinationV1Api(installed.cluster.plane.api_client())
    events = watch.Watch().stream(
        api.list_namespaced_lease,
        NAMESPACE,
        field_selector=f"metadata.name={ELECTION}",
        resource_version=version,
        timeout_seconds=2,
    )
    return [str(event["object"].spec.holder_identity or "") for event in events]


def _pool(installed: Install, namespace: str, name: str) -> dict[str, str]:
    """The set's Exporters, name -> uid."""
    listed = installed.json(
        "get", "exporters.jumpstarter.dev", "-n", namespace,
        "-l", f"virtualtarget.jumpstarter.dev/exporterset={name}",
    )  # fmt: skip
    return {e["metadata"]["name"]: e["metadata"]["uid"] for e in listed["items"]}


def _waiting_events(installed: Install, namespace: str) -> list[dict[str, Any]]:
    listed = installed.json("get", "events.events.k8s.io", "-n", namespace)["items"]
    return [e for e in listed if e["reason"] == WAITING_FOR_CREDENTIALS]


def _full(pool: dict[str, str], size: int) -> dict[str, str] | None:
    return pool if len(pool) == size else None


def _holder_other_than(installed: Install, leader: str) -> str | None:
    holder = _election(installed)["spec"].get("holderIdentity") or ""
    return holder if holder and holder != leader else None


def test_one_reconciler_leads_and_the_other_takes_over_on_its_release(
    installed: Install, namespace: str
) -> None:
    apply(installed.cluster, namespace, virtual_target_class("qemu", namespace))
    apply(
        installed.cluster,
        namespace,
        exporter_set("warm", namespace, class_name="qemu", minAvailableReplicas=2),
    )
    before = _wait("the pool's 2 Exporters", lambda: _full(_pool(installed, namespace, "warm"), 2))
    # No Jumpstarter controller here: the pool waits for credentials, one Event says so.
    waits = _wait("the wait's Event", lambda: _waiting_events(installed, namespace))
    pods = {p["metadata"]["name"] for p in installed.pods(RECONCILER)}
    lease = _election(installed)
    leader, duration = lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]
    assert leader in pods, (leader, pods)
    (standby,) = pods - {leader}
    version = lease["metadata"]["resourceVersion"]

    deleted = time.monotonic()
    installed.kubectl("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
    # The leader releases the Lease as it stops; the standby or the Deployment's new Pod,
    # whichever campaigns first, takes it.
    try:
        successor = _wait(
            "another reconciler holding the Lease",
            lambda: _holder_other_than(installed, leader),
            timeout=2 * duration,
            every=0.1,
        )
    except AssertionError as missed:
        states = {p["metadata"]["name"]: p["status"] for p in installed.pods(RECONCILER)}
        logs = installed.kubectl("logs", standby, "-n", NAMESPACE, "--tail=30", check=False)
        raise AssertionError(
            f"{missed}; the Lease: {_election(installed)['spec']}; the Pods: {states}; "
            f"{standby}'s log: {logs.stdout}{logs.stderr}"
        ) from None
    handover = time.monotonic() - deleted
    which = "the standby" if successor == standby else "the Deployment's new Pod"
    record_figure(
        f"leader {leader} deleted: {which} {successor} leads after {handover:.1f} s "
        f"(lease {duration} s)"
    )
    # The leader released the Lease as it stopped (its holder emptied), and the successor
    # took it after that release, not after the Lease ran out: the order of the writes, not
    # the seconds, says so.
    holders = _holders_since(installed, version)
    assert "" in holders, holders
    released = holders.index("")
    assert set(holders[:released]) <= {leader} and successor in holders[released:], holders
    # The new leader found the pool as it was: the same two Exporters, none added.
    installed.rollout_status(RECONCILER)
    time.sleep(2)  # a pass of the new leader
    assert _pool(installed, namespace, "warm") == before
    # The same wait, so no second Event from the new leader (nor the old one's two passes).
    assert [e["metadata"]["uid"] for e in _waiting_events(installed, namespace)] == [
        e["metadata"]["uid"] for e in waits
    ]


# The leader is deleted while Leases arrive: the ceiling leaves some of them unserved.
ARRIVING_LEASES, CEILING, WARM = 20, 16, 2


def test_leader_deleted_while_20_leases_arrive_every_lease_that_fits_gets_one_instance(
    installed: Install, namespace: str
) -> None:
    labels = {"pool": "burst"}
    apply(installed.cluster, namespace, virtual_target_class("qemu", namespace))
    apply(
        installed.cluster,
        namespace,
        exporter_set(
            "burst", namespace, class_name="qemu", labels=labels, with_template=True,
            minAvailableReplicas=WARM, maxReplicas=CEILING,
        ),
    )  # fmt: skip
    census = Census(installed.cluster.plane, namespace)
    try:
        _wait("the warm buffer", lambda: census.now["burst"] == WARM)
        leader = _election(installed)["spec"]["holderIdentity"]
        started = time.monotonic()
        for i in range(ARRIVING_LEASES):
            apply(installed.cluster, namespace, lease(f"burst-{i}", namespace, labels))
            if i == ARRIVING_LEASES // 4:
                installed.kubectl("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
        # warm buffer + pending Leases, capped by the ceiling
        wanted = min(WARM + ARRIVING_LEASES, CEILING)
        _wait(f"{wanted} instances", lambda: census.now["burst"] == wanted, timeout=120)
        settled = time.monotonic() - started
        new_leader = _election(installed)["spec"]["holderIdentity"]
        time.sleep(3)  # more passes of the new leader: nothing is added, nothing removed
        record_figure(
            f"leader {leader} deleted while {ARRIVING_LEASES} Leases arrived: {new_leader} leads,"
            f" the pool at {census.now['burst']} (ceiling {CEILING}) {settled:.1f} s after the"
            f" first Lease; most Exporters seen at once {census.most['burst']}"
        )
        assert new_leader != leader
        assert census.now["burst"] == wanted and census.most["burst"] == wanted, (
            dict(census.now),
            dict(census.most),
        )
        assert sorted(_pool(installed, namespace, "burst")) == sorted(census.names("burst"))
    finally:
        census.stop()
    installed.rollout_status(RECONCILER)


def test_webhook_rollout_restart_fails_no_admission(installed: Install, namespace: str) -> None:
    apply(installed.cluster, namespace, virtual_target_class("qemu", namespace))
    failures: list[str] = []
    admitted = 0
    stop = threading.Event()

    def creates() -> None:
        nonlocal admitted
        i = 0
        while not stop.is_set():
            body = exporter_set(f"loop-{i}", namespace, class_name="qemu", minAvailableReplicas=0)
            made = installed.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
            admitted += 1
            if made.returncode != 0:
                failures.append(made.stderr.strip())
            else:
                installed.kubectl("delete", "exporterset", f"loop-{i}", "-n", namespace,
                                  "--wait=false", check=False)  # fmt: skip
            i += 1

    loop = threading.Thread(target=creates)
    loop.start()
    try:
        time.sleep(2)
        installed.kubectl("rollout", "restart", f"deployment/{WEBHOOK}", "-n", NAMESPACE)
        installed.rollout_status(WEBHOOK)
        time.sleep(3)  # the old Pods' last requests drain
    finally:
        stop.set()
        loop.join()
    probed, startup = probe_failures(installed)
    record_figure(
        f"webhook rollout restart: {admitted} admissions, {len(failures)} failed; "
        f"probe-failure Events of the install and the restart: {len(probed)} "
        f"(startup {startup})"
    )
    assert admitted > 0
    assert failures == []
    # Quiet stops too: the old Pods' readiness probes, which run while they terminate.
    assert probed == []


def _service_endpoint(installed: Install, monitor: dict[str, Any]) -> tuple[str, int]:
    """The ClusterIP and port of the Service a ServiceMonitor selects, by its port name."""
    wanted = monitor["spec"]["selector"]["matchLabels"]
    port_name = monitor["spec"]["endpoints"][0]["port"]
    for service in installed.json("get", "services", "-n", NAMESPACE)["items"]:
        labels = service["metadata"].get("labels", {})
        if all(labels.get(k) == v for k, v in wanted.items()):
            (port,) = [p for p in service["spec"]["ports"] if p["name"] == port_name]
            return service["spec"]["clusterIP"], port["port"]
    raise AssertionError(f"no Service for ServiceMonitor {monitor['metadata']['name']}")


# Scrapes each target once with the Pod's ServiceAccount token and once without; one
# line per target: "NAME STATUS-WITH-TOKEN STATUS-WITHOUT FIRST-METRIC ALLOW-LIST-VALUE".
SCRAPE = """
import json, socket, ssl, sys
targets = json.loads(sys.argv[1])
def get(t, token):
    ctx = ssl.create_default_context()
    if t["insecure"]:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    else:
        ctx.load_verify_locations(cadata=t["ca"])
    with socket.create_connection((t["ip"], t["port"]), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=t["serverName"] or t["ip"]) as tls:
            auth = f"Authorization: Bearer {token}\\r\\n" if token else ""
            tls.sendall(f"GET {t['path']} HTTP/1.0\\r\\nHost: {t['ip']}\\r\\n{auth}\\r\\n".encode())
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    head, _, body = data.decode().partition("\\r\\n\\r\\n")
    return head.split()[1], body
token = open(targets[0]["tokenFile"]).read().strip()
for t in targets:
    code, body = get(t, token)
    anonymous, _ = get(t, "")
    first = next((l for l in body.splitlines() if l and not l.startswith("#")), "")
    allow = next((l.split()[-1] for l in body.splitlines() if l.startswith(sys.argv[2])), "-")
    print(t["name"], code, anonymous, first.split("{")[0].split()[0] if first else "-", allow)
"""


def test_metrics_answer_prometheus_token_through_the_services(installed: Install) -> None:
    component = installed.tree / "deploy" / "components" / "monitoring"
    # Prometheus's identity and access, as the component binds them.
    rbac = [d for d in yaml.safe_load_all((component / "prometheus-rbac.yaml").read_text()) if d]
    subject = rbac[0]["subjects"][0]
    sa, sa_namespace = subject["name"], subject["namespace"]
    installed.kubectl("create", "namespace", sa_namespace)
    installed.cluster.wait_for_namespace(sa_namespace)
    installed.kubectl("create", "serviceaccount", sa, "-n", sa_namespace)
    installed.kubectl("apply", "-f", str(component / "prometheus-rbac.yaml"))
    ca = (installed.overlay / "certs" / "ca.crt").read_text()
    targets = []
    for monitor in yaml.safe_load_all((component / "servicemonitors.yaml").read_text()):
        (endpoint,) = monitor["spec"]["endpoints"]
        ip, port = _service_endpoint(installed, monitor)
        tls = endpoint.get("tlsConfig", {})
        assert endpoint["scheme"] == "https"
        if not tls.get("insecureSkipVerify"):
            assert tls["ca"]["secret"] == {"name": "virtualtarget-webhook-tls", "key": "ca.crt"}
        targets.append(
            {
                "name": monitor["metadata"]["name"],
                "ip": ip,
                "port": port,
                "path": endpoint["path"],
                "tokenFile": endpoint["bearerTokenFile"],
                "insecure": bool(tls.get("insecureSkipVerify")),
                "serverName": tls.get("serverName", ""),
                "ca": ca,
            }
        )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "scrape"},
        "spec": {
            "serviceAccountName": sa,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": installed.image,
                    "command": ["python3", "-c", SCRAPE, json.dumps(targets), ALLOW_LIST],
                }
            ],
        },
    }
    apply(installed.cluster, sa_namespace, pod)
    done = wait_for_phase(installed.cluster, sa_namespace, "scrape", ("Succeeded", "Failed"))
    log = installed.kubectl("logs", "scrape", "-n", sa_namespace).stdout
    installed.kubectl("delete", "pod", "scrape", "-n", sa_namespace)  # a bare Pod stops a drain
    # What was applied here beside the page's install, which its uninstall would not remove.
    installed.kubectl("delete", "-f", str(component / "prometheus-rbac.yaml"))
    record_figure(
        "metrics through the Services (with the token, without): " + "; ".join(log.splitlines())
    )
    assert done["status"]["phase"] == "Succeeded", log
    answers = {line.split()[0]: line.split()[1:] for line in log.splitlines()}
    assert set(answers) == {t["name"] for t in targets}
    for name, (with_token, without, first_metric, allow_list) in answers.items():
        assert (with_token, without) == ("200", "401"), (name, answers[name])
        assert first_metric != "-", name
        # The page's overlay gave both the image allow-list.
        assert float(allow_list) == 1, (name, answers[name])


def test_the_cert_manager_overlay_renders(installed: Install) -> None:
    rendered = subprocess.run(
        [str(installed.cluster.plane.binaries["kubectl"]), "kustomize",
         str(installed.tree / "deploy" / "overlays" / "cert-manager")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    kinds = {o["kind"] for o in yaml.safe_load_all(rendered.stdout) if o}
    assert {"Issuer", "Certificate", "Deployment", "ValidatingWebhookConfiguration"} <= kinds


def test_a_drain_is_limited_by_the_disruption_budgets(installed: Install) -> None:
    for name in DEPLOYMENTS:
        _wait(
            f"PodDisruptionBudget {name} allowing 1 disruption",
            lambda n=name: installed.json("get", "pdb", n, "-n", NAMESPACE)
            .get("status", {})
            .get("disruptionsAllowed")
            == 1,
        )
    node = installed.cluster.node_name
    drained = installed.kubectl(
        "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s",
        check=False, timeout=60,
    )  # fmt: skip
    try:
        print(drained.stdout + drained.stderr)
        assert drained.returncode != 0, "the drain evicted every Pod"
        assert "would violate the pod's disruption budget" in drained.stderr
        for name in DEPLOYMENTS:
            pods = installed.pods(name)
            running = [
                p
                for p in pods
                if p["status"].get("phase") == "Running"
                and "deletionTimestamp" not in p["metadata"]
            ]
            # minAvailable 1: the budget kept one; the evicted one's replacement waits
            # for a schedulable node.
            assert len(running) == 1, [(p["metadata"]["name"], p["status"]["phase"]) for p in pods]
            pdb = installed.json("get", "pdb", name, "-n", NAMESPACE)["status"]
            assert pdb["disruptionsAllowed"] == 0, pdb
    finally:
        installed.kubectl("uncordon", node)
        for name in DEPLOYMENTS:
            installed.rollout_status(name)


# What the install put in the cluster, cluster-scoped, by its label.
CLUSTER_KINDS = (
    "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations"
)


def test_the_page_uninstalls_everything_it_installed(installed: Install) -> None:
    """Last: the examples, the pools, the classes and the overlay go, by the page's commands
    (each must exit 0), and nothing of the product is left; Jumpstarter's CRDs, its
    operator's, stay."""
    ran = installed.uninstall()
    record_figure(figure("uninstall by docs/install.md", ran))
    kubectl = installed.kubectl
    gone = kubectl("get", "namespace", NAMESPACE, check=False)
    assert "NotFound" in gone.stderr, gone.stdout + gone.stderr
    crds = kubectl("get", "crds", "-o", "name").stdout.split()
    assert [c for c in crds if c.split(".", 1)[1] == "virtualtarget.jumpstarter.dev"] == []
    jumpstarters = {"exporters", "leases", "clients", "exporteraccesspolicies"}
    assert {f"customresourcedefinition.apiextensions.k8s.io/{k}.jumpstarter.dev" for k in
            jumpstarters} <= set(crds), crds  # fmt: skip
    left = kubectl(
        "get", CLUSTER_KINDS, "-l", "app.kubernetes.io/part-of=virtualtarget", "-o", "name"
    )
    assert left.stdout == ""
    # The pools' objects went with their sets and their Exporters.
    pods = installed.json(
        "get", "pods", "--all-namespaces", "-l", "exporterset.jumpstarter.dev/name"
    )
    assert pods["items"] == []
