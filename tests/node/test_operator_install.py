"""The install a Jumpstarter user makes, on the node: Jumpstarter 0.9.0 by its own operator
from the release's manifests, its `Jumpstarter` resource, then this product, then a pool,
each by docs/install.md's own blocks (`node-jumpstarter`, `node-install`, `node-pool`) run
word for word in a copy of the checkout (tests/node/install.py). A real 0.9.0 client, its
config made as `jmp admin create client` makes one, leases the pool's instance, flashes
the marker guest, boots it to the marker and releases it; the successor comes up.

Each command's time is a figure, and so is the empty cluster to the first instance
Available, by step."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.guest import MARKER
from harness.jumpstarter import create_client_config
from harness.jumpstarter_operator import OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE
from harness.node import NodeCluster
from pool.model.jumpstarter import DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY
from pool.model.keys import instance_selector
from tests.docpages import Ran, Session, commands
from tests.e2e.objects import get_json, wait_for
from tests.installpage import NODE_INSTALL, NODE_JUMPSTARTER, NODE_POOL, PAGE
from tests.node.guest_support import monotonic, run_client
from tests.node.install import DEPLOYMENTS, NAMESPACE, figure, readers_checkout, readers_shell
from tests.node.support import record_figure

# The blocks build the images first (minutes on a fresh clone), past the default per test.
pytestmark = pytest.mark.timeout(1200)
# A cluster of its own: the product's reconciler serves the whole cluster, and would take
# the pools the other modules' own reconcilers serve.
OWN_NODE_CLUSTER = True

LAB = "jumpstarter-lab"  # the Jumpstarter resource's namespace (examples/node/)
JUMPSTARTER_DEPLOYMENTS = ("jumpstarter-controller", "jumpstarter-router-0")
NODEPORTS = {"jumpstarter-controller": 30010, "jumpstarter-router-0": 30011}
CA_FILE = ".run/jumpstarter-tls/ca.crt"  # where the page's `certs` wrote the CA
POOL, SELECTOR = "guest", "pool=guest"  # examples/node/pool/
BOOTS = 1


@dataclass
class Lab:
    cluster: NodeCluster
    tree: Path
    shell: Session
    work: Path
    ran: dict[str, list[Ran]] = field(default_factory=dict)
    started: float = 0.0  # time.monotonic() at the first command

    def json(self, *args: str) -> Any:
        return get_json(self.cluster, *args)

    @property
    def ca_pem(self) -> str:
        return (self.tree / CA_FILE).read_text()

    def run(self, block: str) -> None:
        self.ran[block] = self.shell.run_all(commands(PAGE, block))
        record_figure(figure(f"docs/install.md {block}", self.ran[block]))


@pytest.fixture(scope="module")
def lab(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Jumpstarter by its operator, by the page's `node-jumpstarter`."""
    work = tmp_path_factory.mktemp("operator-install")
    tree = readers_checkout(work, node_cluster)
    done = Lab(node_cluster, tree, readers_shell(tree, work), work, started=time.monotonic())
    done.run(NODE_JUMPSTARTER)
    yield done


@pytest.fixture(scope="module")
def product(lab: Lab) -> Lab:
    """This product and the pool, by the page's `node-install` and `node-pool`."""
    lab.run(NODE_INSTALL)
    lab.run(NODE_POOL)
    return lab


def _available(lab: Lab, namespace: str, name: str) -> bool:
    status = lab.json("deployment", name, "-n", namespace).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return conditions.get("Available") == "True"


def test_the_operator_brings_up_the_controller_and_router_that_answer_on_the_node_ip(
    lab: Lab,
) -> None:
    assert _available(lab, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT)
    node_ip = lab.cluster.network.node_ip
    for name in JUMPSTARTER_DEPLOYMENTS:
        assert _available(lab, LAB, name), name
        deployment = lab.json("deployment", name, "-n", LAB)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        # The endpoint the Jumpstarter resource gave, and the TLS Secret it named.
        assert env["EXTERNAL_CERT_PEM"] == "/tls/tls.crt", env
        secrets = [v["secret"]["secretName"] for v in deployment["spec"]["template"]["spec"]
                   ["volumes"] if "secret" in v]  # fmt: skip
        assert "jumpstarter-grpc-tls" in secrets, secrets
        ports = [
            p["nodePort"]
            for s in lab.json("services", "-n", LAB)["items"]
            if s["spec"]["type"] == "NodePort" and s["spec"]["selector"].get("app") == name
            for p in s["spec"]["ports"]
        ]
        assert ports == [NODEPORTS[name]], (name, ports)
    # Without cert-manager the operator publishes an empty CA for `jmp admin`.
    published = lab.json("configmap", DEFAULT_CA_CONFIGMAP, "-n", LAB)["data"]
    assert published == {DEFAULT_CA_KEY: ""}, published
    # The controller answers on the node IP: a Client made as `jmp admin create client`
    # makes one (the CA put in), and the release's client lists the exporters.
    from jumpstarter.config.client import ClientConfigV1Alpha1

    asked = time.monotonic()
    config = create_client_config(
        LAB, lab.cluster.kubeconfig, "probe", lab.work / "probe.yaml", ca_pem=lab.ca_pem
    )
    client = ClientConfigV1Alpha1.from_file(config)
    assert client.endpoint == f"{node_ip}:{NODEPORTS['jumpstarter-controller']}"
    listed = wait_for("the controller answering on the node IP", client.list_exporters, 60)
    record_figure(
        f"operator install: the controller at {client.endpoint} answers a Client's request "
        f"{time.monotonic() - asked:.1f} s after the Client was created ({listed})"
    )


def _instances(lab: Lab) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = lab.json("exporters", "-n", LAB, "-l", instance_selector(POOL))[
        "items"
    ]
    return items


def _online(exporter: dict[str, Any]) -> bool:
    conditions = (exporter.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Online" and c["status"] == "True" for c in conditions)


def _pool_available(lab: Lab) -> bool:
    status = lab.json("exporterset", POOL, "-n", LAB).get("status") or {}
    return status.get("availableReplicas") == 1 and status.get("podsRunning") == 1


def test_a_client_leases_the_pool_s_instance_boots_a_guest_and_the_successor_comes_up(
    product: Lab, marker_guest: Path, tmp_path: Path
) -> None:
    lab = product
    for name in DEPLOYMENTS:
        assert _available(lab, NAMESPACE, name), name
    pool_applied = time.monotonic()
    wait_for("the pool's instance Available", lambda: _pool_available(lab), 300)
    available = time.monotonic()
    steps = {block: sum(r.seconds for r in ran) for block, ran in lab.ran.items()}
    record_figure(
        "empty cluster -> first instance Available "
        f"{available - lab.started + lab.cluster.timings.get('start', 0):.0f} s: cluster start "
        f"{lab.cluster.timings.get('start', 0):.0f} s, "
        + ", ".join(f"{block} {s:.0f} s" for block, s in steps.items())
        + f", pool applied -> instance Available {available - pool_applied:.0f} s"
    )
    (instance,) = _instances(lab)
    name, uid = instance["metadata"]["name"], instance["metadata"]["uid"]
    config = create_client_config(
        LAB, lab.cluster.kubeconfig, "tester", tmp_path / "tester.yaml", ca_pem=lab.ca_pem
    )
    run = run_client(config, SELECTOR, marker_guest, BOOTS, tmp_path)
    assert run.code == 0, run.output
    acquired = run.first("lease acquired")
    assert acquired["exporter"] == name, run.output
    markers = [e["line"] for e in run.events if e["event"] == "marker"]
    assert len(markers) == BOOTS and all(m.startswith(MARKER) for m in markers), run.output

    def successor() -> dict[str, Any] | None:
        found = _instances(lab)
        new = [e for e in found if e["metadata"]["uid"] != uid]
        gone = all(e["metadata"]["uid"] != uid for e in found)
        return new[0] if new and gone and _online(new[0]) else None

    new = wait_for("the successor Online", successor, 300)
    wait_for("the successor Available", lambda: _pool_available(lab), 300)
    online = time.monotonic()
    flash = run.at("flashed") - run.at("flash started")
    record_figure(
        f"first lease ({name}) through the operator's Jumpstarter: lease request -> client "
        f"holding it {run.at('lease acquired') - run.at('lease requested'):.2f} s; flash "
        f"{marker_guest.stat().st_size >> 20} MiB {flash:.1f} s; power-on -> marker "
        f"{run.boot_times()}; release -> successor {new['metadata']['name']} Available "
        f"{online - monotonic(run.at('releasing')):.1f} s"
    )
