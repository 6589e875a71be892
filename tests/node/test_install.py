"""The install a Jumpstarter user makes, on a real node, by docs/install.md's own commands
(tests/node/install.py), once for the module: Jumpstarter 0.9.0 by its own operator, this
product beside it, the node pool and the examples. Each test checks one promise on the
running Pods: the operator's controller and router on the node IP; a 0.9.0 client leasing
the pool's instance, booting a guest on it and its successor coming up; the product's
Deployments, admission, leader handovers (one while a Client's Leases arrive), a webhook
rollout, metrics, a drain (which leaves the install as it found it), a downgrade to the
previous release and the upgrade back under a held lease; the last uninstalls by the page's
commands with the lease still held, and finds nothing of the product left but the leased
instance until the page's last step."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from harness.deploy_render import REPO
from harness.guest import MARKER
from harness.jumpstarter_operator import OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE
from harness.node import NodeCluster
from harness.release import PRODUCT_REPOSITORY, build_release, previous_version, source_of
from pool.model.jumpstarter import DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY
from pool.model.keys import LEASE_PROTECTION, NAME_LABEL, SET_LABEL
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
from tests.e2e.objects import exporter_set, virtual_target_class, wait_for
from tests.installpage import EXAMPLES_APPLY, PAGE, page_of
from tests.node.guest_support import monotonic, run_client
from tests.node.install import (
    DEPLOYMENTS,
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    Install,
    figure,
    install,
)
from tests.node.lab import (
    JUMPSTARTER_DEPLOYMENTS,
    LAB,
    NODEPORTS,
    POOL,
    SELECTOR,
    available,
    client,
    instances,
    jumpstarter_serving,
    lease,
    lease_state,
    online,
    owned_by,
    pool_available,
    request_lease,
    successor,
)
from tests.node.release_install import import_product
from tests.node.support import apply, record_figure, wait_for_phase

# The install builds the image first: on a fresh clone (no debootstrap base, no layer
# cache) about 5 minutes, which the first test's setup would otherwise not be given.
pytestmark = pytest.mark.timeout(1200)
# A cluster of its own: the install puts Jumpstarter's operator and the product, which serves
# the whole cluster, on it, and a drain evicts every Pod on the node.
OWN_NODE_CLUSTER = True

PROBE_FAILURE = "Unhealthy"  # the kubelet's Event reason for a failed probe
# A startup probe that fails is what it is for: it gives a slow start (a loaded machine)
# up to its failureThreshold before the liveness probe counts. Liveness and readiness
# failures are what a quiet start or stop must not show.
STARTUP_PROBE = "Startup probe failed"
ELECTION = ElectionConfig(namespace=NAMESPACE).name  # the reconciler's election Lease
BOOTS = 1  # of the marker guest, by the client's lease
# What `make previous-release` wrote: the previous release's product and manifests.
PREVIOUS = REPO / ".cache" / "release" / "previous"
INSTANCE_POD_LABEL = NAME_LABEL  # every pool instance's Pod carries it


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
    for block, ran in done.blocks.items():
        record_figure(figure(f"docs/{page_of(block).name} {block}", ran))
    record_figure(figure("install by the documented blocks", done.installed))
    wait_for("the node pool's instance Available", lambda: pool_available(done), 300)
    available_at = time.monotonic()
    start = node_cluster.timings.get("start", 0)
    steps = {block: sum(r.seconds for r in ran) for block, ran in done.blocks.items()}
    record_figure(
        f"empty cluster -> first instance Available {available_at - done.started + start:.0f}"
        f" s: cluster start {start:.0f} s, "
        + ", ".join(f"{block} {s:.0f} s" for block, s in steps.items())
        + f", pool applied -> instance Available seen {available_at - done.pool_applied:.0f} s"
    )
    yield done


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


def test_the_operator_brings_up_the_controller_and_router_that_answer_on_the_node_ip(
    installed: Install, tmp_path: Path
) -> None:
    assert available(installed, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT)
    node_ip = installed.cluster.network.node_ip
    for name in JUMPSTARTER_DEPLOYMENTS:
        assert available(installed, LAB, name), name
        deployment = installed.json("get", "deployment", name, "-n", LAB)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        # The endpoint the Jumpstarter resource gave, and the TLS Secret it named.
        assert env["EXTERNAL_CERT_PEM"] == "/tls/tls.crt", env
        secrets = [v["secret"]["secretName"] for v in deployment["spec"]["template"]["spec"]
                   ["volumes"] if "secret" in v]  # fmt: skip
        assert "jumpstarter-grpc-tls" in secrets, secrets
        ports = [
            p["nodePort"]
            for s in installed.json("get", "services", "-n", LAB)["items"]
            if s["spec"]["type"] == "NodePort" and s["spec"]["selector"].get("app") == name
            for p in s["spec"]["ports"]
        ]
        assert ports == [NODEPORTS[name]], (name, ports)
    # Without cert-manager the operator publishes an empty CA for `jmp admin`.
    published = installed.json("get", "configmap", DEFAULT_CA_CONFIGMAP, "-n", LAB)["data"]
    assert published == {DEFAULT_CA_KEY: ""}, published
    # The controller answers on the node IP: a Client made as `jmp admin create client`
    # makes one (the CA put in), and the release's client lists the exporters.
    asked = time.monotonic()
    probe = client(installed, "probe", tmp_path / "probe.yaml")
    assert probe.endpoint == f"{node_ip}:{NODEPORTS['jumpstarter-controller']}"
    listed = wait_for("the controller answering on the node IP", probe.list_exporters, 60)
    record_figure(
        f"operator install: the controller at {probe.endpoint} answers a Client's request "
        f"{time.monotonic() - asked:.1f} s after the Client was created ({listed})"
    )


def test_a_client_leases_the_pool_s_instance_boots_a_guest_and_the_successor_comes_up(
    installed: Install, marker_guest: Path, tmp_path: Path
) -> None:
    for name in DEPLOYMENTS:
        assert available(installed, NAMESPACE, name), name
    (instance,) = instances(installed)
    name, uid = instance["metadata"]["name"], instance["metadata"]["uid"]
    config = tmp_path / "tester.yaml"
    client(installed, "tester", config)
    run = run_client(config, SELECTOR, marker_guest, BOOTS, tmp_path)
    assert run.code == 0, run.output
    acquired = run.first("lease acquired")
    assert acquired["exporter"] == name, run.output
    markers = [e["line"] for e in run.events if e["event"] == "marker"]
    assert len(markers) == BOOTS and all(m.startswith(MARKER) for m in markers), run.output

    new = wait_for("the successor Online", lambda: successor(installed, uid), 300)
    wait_for("the successor Available", lambda: pool_available(installed), 300)
    online_at = time.monotonic()
    flash = run.at("flashed") - run.at("flash started")
    record_figure(
        f"first lease ({name}) through the operator's Jumpstarter: lease request -> client "
        f"holding it {run.at('lease acquired') - run.at('lease requested'):.2f} s; flash "
        f"{marker_guest.stat().st_size >> 20} MiB {flash:.1f} s; power-on -> marker "
        f"{run.boot_times()}; release -> successor {new['metadata']['name']} Available "
        f"{online_at - monotonic(run.at('releasing')):.1f} s"
    )


def test_the_page_s_examples_made_a_pool(installed: Install) -> None:
    documented = commands(PAGE, EXAMPLES_APPLY)
    (applied,) = [r for r in installed.installed if r.command in documented]
    assert applied.run == applied.command.text  # as written
    assert_examples_applied(applied, "default")
    pool = wait_for("the examples' pool", lambda: _pool(installed, "default", "fedora-x86"))
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
    (election,) = [le for le in leases if le["metadata"]["name"] == ELECTION]
    return election


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
    before = wait_for(
        "the pool's 2 Exporters", lambda: _full(_pool(installed, namespace, "warm"), 2)
    )
    # No Jumpstarter controller here: the pool waits for credentials, one Event says so.
    waits = wait_for("the wait's Event", lambda: _waiting_events(installed, namespace))
    pods = {p["metadata"]["name"] for p in installed.pods(RECONCILER)}
    election = _election(installed)
    leader = election["spec"]["holderIdentity"]
    duration = election["spec"]["leaseDurationSeconds"]
    assert leader in pods, (leader, pods)
    (standby,) = pods - {leader}
    version = election["metadata"]["resourceVersion"]

    deleted = time.monotonic()
    installed.kubectl("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
    # The leader releases the Lease as it stops; the standby or the Deployment's new Pod,
    # whichever campaigns first, takes it.
    try:
        successor = wait_for(
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


# The leader is deleted while a Client's Leases arrive: the ceiling leaves some unserved.
ARRIVING_LEASES, CEILING, WARM = 20, 6, 2
BURST = {"pool": "burst"}
# The burst pool's class: the node pool's (examples/node/pool/), its Pods requesting little
# (the node has 2 cores), so that every instance up to the ceiling runs `jmp run`.
BURST_CLASS = {
    "caBundleConfigMapRef": {"name": "jumpstarter-grpc-ca", "key": "ca.crt"},
    "parameters": {"layout": "exporter", "resources": {"cpu": 1, "memory": "256Mi"}},
    "scheduling": {"resources": {"requests": {"cpu": "10m", "memory": "128Mi"}}},
    "images": {"exporter": {"image": QEMU_EXPORTER_IMAGE, "imagePullPolicy": "IfNotPresent"}},
}


def _lease_states(installed: Install, names: list[str]) -> dict[str, tuple[str, str]]:
    """Each Lease's state (`lab.lease_state`) and the Exporter assigned to it."""
    listed = installed.json("get", "leases.jumpstarter.dev", "-n", LAB)["items"]
    found = {le["metadata"]["name"]: le for le in listed}
    return {
        name: (
            lease_state(found[name]) if name in found else "missing",
            ((found.get(name, {}).get("status") or {}).get("exporterRef") or {}).get("name", ""),
        )
        for name in names
    }


def _holders(states: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    """Each Exporter assigned to a Lease, and the Leases assigned it: more than one where
    0.9.0's controller gave it twice. Its Lease reconciler takes an Exporter no active Lease
    names in its cache (`reconcileStatusExporterRef`, lease_controller.go; its own TODO says
    it does not look at other Lease requests), so in a burst a Lease assigned a moment
    before may not be seen yet. Jumpstarter's, not the pool's."""
    holders: dict[str, list[str]] = {}
    for name, (state, exporter) in sorted(states.items()):
        if state == "assigned":
            holders.setdefault(exporter, []).append(name)
    return holders


def _burst_seen(installed: Install, census: Census, states: dict[str, tuple[str, str]]) -> str:
    """The burst pool as the apiserver has it: each Exporter's Online condition and Lease,
    each instance Pod's phase and restarts, beside the census and the Leases' states."""
    exporters = installed.json(
        "get", "exporters.jumpstarter.dev", "-n", LAB, "-l", f"{SET_LABEL}=burst"
    )["items"]
    pods = installed.json("get", "pods", "-n", LAB, "-l", INSTANCE_POD_LABEL)["items"]
    online = {
        e["metadata"]["name"]: (
            {c["type"]: c["status"] for c in (e.get("status") or {}).get("conditions") or []},
            ((e.get("status") or {}).get("leaseRef") or {}).get("name", ""),
        )
        for e in exporters
    }
    phases = {
        p["metadata"]["name"]: (
            p["status"].get("phase"),
            sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or []),
        )
        for p in pods
    }
    return (
        f"census now {dict(census.now)} most {dict(census.most)}; Leases "
        f"{dict(Counter(s for s, _ in states.values()))} {states}; Exporters {online}; "
        f"Pods (phase, restarts) {phases}"
    )


def test_leader_deleted_while_a_client_s_20_leases_arrive_each_is_assigned_or_pending(
    installed: Install, tmp_path: Path
) -> None:
    """A Client made as `jmp admin create client` makes one asks for 20 Leases by the pool's
    selector (`jmp create lease`), the reconciler's leader deleted after the sixth. The
    0.9.0 controller assigns each Lease an Exporter of the pool (at most the ceiling's) or
    keeps it Pending; none ends before the Client releases it. Where that controller gives
    one Exporter to two Leases (`_holders`), the figure says so."""
    apply(installed.cluster, LAB, virtual_target_class("burst", LAB, **BURST_CLASS))
    apply(
        installed.cluster,
        LAB,
        exporter_set(
            "burst", LAB, class_name="burst", labels=BURST, with_template=True,
            minAvailableReplicas=WARM, maxReplicas=CEILING,
        ),
    )  # fmt: skip
    census = Census(installed.cluster.plane, LAB)
    names = [f"burst-{i}" for i in range(ARRIVING_LEASES)]
    jmp = client(installed, "burst", tmp_path / "burst.yaml")
    seen: dict[str, set[str]] = {name: set() for name in names}

    def look() -> dict[str, tuple[str, str]]:
        states = _lease_states(installed, names)
        for name, (state, _) in states.items():
            seen[name].add(state)
        return states

    def settled() -> dict[str, tuple[str, str]] | None:
        states = look()
        held = _holders(states)
        return states if census.now["burst"] == CEILING and len(held) == CEILING else None

    try:
        # Before the pool has an Exporter the controller ends a Lease as Unsatisfiable.
        wait_for("the warm buffer", lambda: census.now["burst"] == WARM)
        leader = _election(installed)["spec"]["holderIdentity"]
        started = time.monotonic()
        for i, name in enumerate(names):
            request_lease(jmp, name, "pool=burst")
            if i == ARRIVING_LEASES // 4:
                installed.kubectl("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
        states = wait_for(
            f"{CEILING} instances, each leased",
            settled,
            timeout=300,
            every=1.0,
            seen=lambda: _burst_seen(installed, census, look()),
        )
        took = time.monotonic() - started
        new_leader = _election(installed)["spec"]["holderIdentity"]
        time.sleep(3)  # more passes of the new leader: nothing is added, nothing removed
        states = look()
        counts = Counter(state for state, _ in states.values())
        holders = _holders(states)
        twice = {exporter: leases for exporter, leases in holders.items() if len(leases) > 1}
        record_figure(
            f"leader {leader} deleted while a Client's {ARRIVING_LEASES} Leases arrived: "
            f"{new_leader} leads; {took:.1f} s after the first Lease the pool at "
            f"{census.now['burst']} (ceiling {CEILING}), the controller's Leases "
            f"{dict(counts)}; most Exporters seen at once {census.most['burst']}; states "
            f"each Lease was seen in: {dict(Counter('+'.join(sorted(s)) for s in seen.values()))}; "
            f"Exporters 0.9.0's controller assigned to two Leases or more: {twice}"
        )
        assert new_leader != leader
        assert census.now["burst"] == CEILING and census.most["burst"] == CEILING, (
            dict(census.now),
            dict(census.most),
        )
        pool = _pool(installed, LAB, "burst")
        assert sorted(pool) == sorted(census.names("burst"))
        # Each Lease assigned (each instance of the pool to one, but where Jumpstarter's
        # controller gave it to two) or pending, none ended or refused: not by the handover,
        # not ever before the release.
        extra = sum(len(names) - 1 for names in twice.values())
        assert counts == {
            "assigned": CEILING + extra,
            "pending": ARRIVING_LEASES - CEILING - extra,
        }, states
        assert sorted(holders) == sorted(pool), (holders, pool)
        every = set().union(*seen.values())
        assert every <= {"new", "pending", "assigned"}, seen
    finally:
        census.stop()
    for name in names:  # what `jmp delete lease NAME` asks
        jmp.delete_lease(name=name)
    # Released, each ends as such; an assigned one then goes with its instance (the
    # controller made its Exporter its owner, and the released instance is replaced).
    after: set[str] = set()

    def released() -> bool:
        states = {state for state, _ in _lease_states(installed, names).values()}
        after.update(states)
        return states <= {"ended:Released", "missing"}

    try:
        wait_for("each Lease ended as released", released, timeout=120)
    finally:
        record_figure(f"the burst's Leases after the release: states seen {sorted(after)}")
    assert after <= {"assigned", "pending", "ended:Released", "missing"}, after
    installed.kubectl("delete", "exporterset", "burst", "-n", LAB)
    wait_for("the burst pool gone", lambda: _pool(installed, LAB, "burst") == {}, timeout=180)
    installed.kubectl("delete", "virtualtargetclass", "burst", "-n", LAB)
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
        wait_for(
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
        # The drain evicted Jumpstarter's controller and router too (the operator gives
        # them no budget): until the new controller serves, every exporter's `jmp run`
        # is refused, fails five times within seconds and exits 0, and the pool replaces
        # its Pod. The tests after this one start from Jumpstarter serving again.
        restored = time.monotonic()
        wait_for("Jumpstarter serving after the drain", lambda: jumpstarter_serving(installed))
        record_figure(
            f"drain: Jumpstarter's controller leading and its router Available again "
            f"{time.monotonic() - restored:.1f} s after the uncordon and the product's rollouts"
        )


@dataclass
class Held:
    """A lease a real 0.9.0 Client holds on the node pool's instance: the Client, the
    Lease's name, the instance's Exporter and Pod (name, uid)."""

    jmp: Any
    lease: str
    exporter: tuple[str, str]
    pod: tuple[str, str]


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def held(installed: Install, tmp_path_factory: pytest.TempPathFactory) -> Held:
    """`jmp create lease -l pool=guest` by a new Client, assigned the pool's instance."""

    def serving() -> dict[str, Any] | None:
        # A drain before may have evicted its Pod and Jumpstarter's controller: Jumpstarter
        # serving, and the instance's next Pod running, Ready (its exporter connected) and
        # Online.
        if not jumpstarter_serving(installed):
            return None
        found = instances(installed)
        if len(found) != 1 or not online(found[0]) or not pool_available(installed):
            return None
        pods = owned_by(installed, "pods", found[0]["metadata"]["uid"])
        running = [
            p
            for p in pods
            if p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
        ]
        ready = [p for p in running if _pod_ready(p)]
        return found[0] if len(pods) == 1 and ready else None

    instance = wait_for("the node pool's instance Available, its Pod running", serving, 300)
    jmp = client(installed, "holder", tmp_path_factory.mktemp("holder") / "holder.yaml")
    request_lease(jmp, "held", SELECTOR)
    wait_for("the held Lease assigned", lambda: lease_state(lease(installed, "held")) == "assigned")
    meta = instance["metadata"]
    assert lease(installed, "held")["status"]["exporterRef"]["name"] == meta["name"]
    (pod,) = owned_by(installed, "pods", meta["uid"])
    return Held(
        jmp, "held", (meta["name"], meta["uid"]), (pod["metadata"]["name"], pod["metadata"]["uid"])
    )


def _still_held(installed: Install, held: Held) -> str:
    """Why the held lease is not as it was ("" when it is: assigned the same Exporter,
    which is the same object, its Pod too)."""
    found = lease(installed, held.lease)
    if lease_state(found) != "assigned":
        return f"the Lease is {lease_state(found)}: {found.get('status')}"
    if found["status"]["exporterRef"]["name"] != held.exporter[0]:
        return f"the Lease moved to {found['status']['exporterRef']}"
    exporters = {e["metadata"]["name"]: e["metadata"]["uid"] for e in instances(installed)}
    if exporters.get(held.exporter[0]) != held.exporter[1]:
        return f"the Exporter is not the same: {exporters}"
    pods = owned_by(installed, "pods", held.exporter[1])
    if [(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods] != [held.pod]:
        return f"the instance's Pod is not the same: {[p['metadata'] for p in pods]}"
    return ""


@dataclass
class Rolled:
    """What a change of release showed: its rollout's time, the pool's fewest Exporters,
    why the held lease was not as it was (each look), the instances seen (uids), the
    reconciler's election Leases and their holders seen."""

    seconds: float
    fewest: int
    problems: list[str]
    instances: set[str]
    elections: set[str]
    holders: set[str]


def _change_release(installed: Install, held: Held, overlay: Path) -> Rolled:
    """`kubectl apply -k` another release's self-signed overlay (the install's certificates
    in it) and roll both Deployments out, looking twice a second at the lease, the pool's
    instances and the namespace's election Leases."""
    stop, seen = threading.Event(), Rolled(0.0, len(instances(installed)), [], set(), set(), set())

    def watch() -> None:
        while not stop.is_set():
            if why := _still_held(installed, held):
                seen.problems.append(why)
            found = instances(installed)
            seen.fewest = min(seen.fewest, len(found))
            seen.instances |= {e["metadata"]["uid"] for e in found}
            leases = installed.json("get", "leases.coordination.k8s.io", "-n", NAMESPACE)
            for item in leases["items"]:
                seen.elections.add(item["metadata"]["name"])
                seen.holders.add(item["spec"].get("holderIdentity") or "")
            time.sleep(0.5)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        installed.kubectl("apply", "-k", str(overlay))
        for deployment in DEPLOYMENTS:
            installed.rollout_status(deployment)
        seen.seconds = time.monotonic() - started
        time.sleep(3)  # passes of the new leader
    finally:
        stop.set()
        watcher.join()
    return seen


def _crd_uids(installed: Install) -> dict[str, str]:
    found = installed.json("get", "crd", "-l", "app.kubernetes.io/part-of=virtualtarget")
    return {c["metadata"]["name"]: c["metadata"]["uid"] for c in found["items"]}


def _images(installed: Install) -> set[str]:
    return {
        p["spec"]["containers"][0]["image"]
        for d in DEPLOYMENTS
        for p in installed.pods(d)
        if "deletionTimestamp" not in p["metadata"]
    }


def test_a_downgrade_to_the_previous_release_and_the_upgrade_back_keep_a_held_lease(
    installed: Install, held: Held, tmp_path: Path
) -> None:
    """The previous release (`make previous-release`: the newest in releases.toml, from its
    commit) installed over this one as docs/versions.md says, then this one again, while a
    Client holds the pool's instance: no instance created or deleted, the lease untouched,
    one election Lease (one leader at a time), the CRDs updated in place (the same
    objects)."""
    previous = build_release(source_of(previous_version()), PREVIOUS, product_only=True)
    by_digest = import_product(installed.cluster, previous)
    older = tmp_path / "previous"
    shutil.copytree(previous / "kustomize", older)
    overlay = older / "deploy" / "overlays" / "self-signed"
    shutil.copytree(installed.overlay / "certs", overlay / "certs")
    shutil.copyfile(installed.overlay / "ca-bundle.yaml", overlay / "ca-bundle.yaml")
    floor = installed.json("get", "exporterset", POOL, "-n", LAB)["spec"]["minReplicas"]
    before, crds, current = (
        {e["metadata"]["uid"] for e in instances(installed)},
        _crd_uids(installed),
        _images(installed),
    )
    down = _change_release(installed, held, overlay)
    digest = by_digest.rpartition("@")[2]
    assert _images(installed) == {f"{PRODUCT_REPOSITORY}:{previous.name}@{digest}"}
    up = _change_release(installed, held, installed.overlay)
    assert _images(installed) == current
    for way, rolled in (("down", down), ("up", up)):
        record_figure(
            f"{way}grade with {held.exporter[0]} leased ({previous.name} and back): both "
            f"Deployments rolled out in {rolled.seconds:.1f} s; the pool's fewest Exporters "
            f"{rolled.fewest} (floor {floor}); instances seen {len(rolled.instances)}; election "
            f"Leases {sorted(rolled.elections)}, holders seen {len(rolled.holders)}; "
            f"{len(rolled.problems)} looks found the lease not as it was"
        )
        assert rolled.problems == [], rolled.problems
        assert rolled.instances == before, (way, rolled.instances - before)
        assert rolled.fewest >= floor
        assert rolled.elections == {ELECTION}, rolled.elections
    assert _still_held(installed, held) == ""
    assert _crd_uids(installed) == crds


# What the install put in the cluster, cluster-scoped, by its label.
CLUSTER_KINDS = (
    "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations"
)


def test_the_page_uninstalls_everything_it_installed_while_a_lease_is_held(
    installed: Install, held: Held, tmp_path: Path
) -> None:
    """Last: the examples, the pools, the classes and the overlay go, by the page's commands
    (each must exit 0), while a Client holds the node pool's instance, and nothing of the
    product is left but that instance; Jumpstarter's CRDs, its operator's, stay.

    What stays of the leased instance once the overlay is gone: its Exporter, Terminating
    (its set was deleted) and kept by the finalizer `virtualtarget.jumpstarter.dev/
    lease-protection`; its Pod, running and serving the lease; its config Secret (the
    product's) and its credential Secret (Jumpstarter's controller's), both owned by the
    Exporter. The lease is not ended, and Jumpstarter goes on: its controller Available, a
    new Client made, its Lease pending on the held instance. Nothing of the product
    removes that finalizer any more, so after the lease ends the page's `uninstall-leased`
    step takes it off, and the garbage collector removes the Exporter, its Pod and both
    Secrets: nothing of the product is left."""
    secrets = {s["metadata"]["name"] for s in owned_by(installed, "secrets", held.exporter[1])}
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
    # The leased instance stays as it was, serving; only its deletion is asked.
    assert _still_held(installed, held) == ""

    def deleting() -> dict[str, Any] | None:
        found = [e for e in instances(installed) if e["metadata"]["uid"] == held.exporter[1]]
        return found[0] if found and found[0]["metadata"].get("deletionTimestamp") else None

    # Its set went, so the garbage collector deleted it; the finalizer keeps it.
    exporter = wait_for("the leased instance's Exporter Terminating", deleting)
    assert exporter["metadata"]["finalizers"] == [LEASE_PROTECTION], exporter["metadata"]
    (pod,) = owned_by(installed, "pods", held.exporter[1])
    assert pod["status"]["phase"] == "Running", pod["status"]
    assert {s["metadata"]["name"] for s in owned_by(installed, "secrets", held.exporter[1])} == (
        secrets
    )
    assert len(secrets) == 2, secrets  # the config Secret and the credential Secret
    others = installed.json("get", "pods", "--all-namespaces", "-l", INSTANCE_POD_LABEL)
    assert [p["metadata"]["uid"] for p in others["items"]] == [held.pod[1]]
    # Jumpstarter goes on: a new Client, its Lease pending on the held instance.
    assert all(available(installed, LAB, name) for name in JUMPSTARTER_DEPLOYMENTS)
    after = client(installed, "after", tmp_path / "after.yaml")
    request_lease(after, "after", SELECTOR)
    waiting = wait_for(
        "the new Client's Lease pending",
        lambda: (f := lease(installed, "after")) and lease_state(f) == "pending" and f,
    )
    reason = {c["type"]: c["reason"] for c in waiting["status"]["conditions"]}["Pending"]
    assert reason == "NotAvailable", waiting["status"]
    after.delete_lease(name="after")
    # The Client releases its lease; then the page's last step.
    held.jmp.delete_lease(name=held.lease)
    wait_for(
        "the held Lease ended as released",
        lambda: lease_state(lease(installed, held.lease)) == "ended:Released",
    )
    cleaned = installed.uninstall_leased()
    record_figure(figure("uninstall, the leased instances (docs/install.md)", cleaned))
    wait_for(
        "the leased instance's Exporter, Pod and Secrets gone",
        lambda: not [e for e in instances(installed) if e["metadata"]["uid"] == held.exporter[1]]
        and not owned_by(installed, "pods", held.exporter[1])
        and not owned_by(installed, "secrets", held.exporter[1]),
        timeout=120,
    )
    # The pools' objects went with their sets and their Exporters.
    pods = installed.json("get", "pods", "--all-namespaces", "-l", INSTANCE_POD_LABEL)
    assert pods["items"] == []
    exporters = installed.json("get", "exporters", "--all-namespaces", "-l", SET_LABEL)
    assert exporters["items"] == []
