"""The guest's disk on a real node (`parameters.storage`), under a real lease.

A StorageClass of static local PersistentVolumes (`kubernetes.io/no-provisioner`,
`WaitForFirstConsumer`: the scheduler binds a claim to a volume on the node its Pod goes
to), directories on this machine, as an administrator sets one up without a provisioner.
On it, a pool's instance gets a generic ephemeral volume: kube-controller-manager makes
its claim `<pod>-disk`, owned by the Pod, the scheduler binds it, the kubelet mounts it
with the exporter's group (fsGroup 65532). A real Jumpstarter 0.9.0 client leases the
instance, flashes the marker guest, boots it and power-cycles it; 0.9.0's QEMU driver
writes the disk into its temporary directory, which is the claim's volume: the test sees
it there on the host while the lease runs. Released, the instance is replaced
(ExitAndReplace) and its claim goes with its Pod. A Retain pool keeps its released
instance, its Pod and so its claim, until the instance is deleted. A pool on the default
emptyDir gets the same under a real lease, its disk in the kubelet's emptyDir.

The instances run the QEMU exporter image this project ships, in the `exporter` layout;
Jumpstarter's released controller and router serve each pool's namespace, as in the node
tier's pool tests (`tests/node/pool_support.py`, `tests/node/guest_support.py`). Every
test prints its figures; waits are bounded polls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kubeget import find_json
from pool.model.keys import RETAINED_FROM
from tests.node import test_pools_node as pools
from tests.node.guest_support import DiskSeen, run_client_watching_disk
from tests.node.pool_support import Pool, fresh_pool
from tests.node.sharing import TENTH_OF_A_CORE
from tests.node.support import record_figure

pytestmark = pytest.mark.timeout(900)


Obj = dict[str, Any]
STORAGE_CLASS = "local-disks"
DISKS = 5  # static volumes: two instances of each claim test, and one to spare
DISK_CAPACITY = "2Gi"
SIZE = "1Gi"  # the guest's disk; the volume is 10% more
VOLUME = "1181116006"  # 1Gi and 10%, as resource.Quantity prints it
ON_A_CLAIM = {
    **pools.GUEST_PARAMETERS,
    "storage": {"size": SIZE, "storageClassName": STORAGE_CLASS},
}
ON_EMPTYDIR = {**pools.GUEST_PARAMETERS, "storage": {"size": SIZE}}
SELECTOR = "pool=disk"


@pytest.fixture(scope="module")
def local_disks(node_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The StorageClass and its static local volumes, one directory each under the folder
    returned."""
    root = tmp_path_factory.mktemp("disks")
    items: list[Obj] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    ]
    for index in range(DISKS):
        (root / f"disk-{index}").mkdir()
        items.append(_local_volume(node_cluster.node_name, root / f"disk-{index}", index))
    node_cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    yield root
    node_cluster.kubectl("delete", "pv", "-l", f"disks={STORAGE_CLASS}", "--wait=false")


def _local_volume(node: str, path: Path, index: int) -> Obj:
    on_the_node = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"local-disk-{index}", "labels": {"disks": STORAGE_CLASS}},
        "spec": {
            "capacity": {"storage": DISK_CAPACITY},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            "local": {"path": str(path)},
            "nodeAffinity": {
                "required": {"nodeSelectorTerms": [{"matchExpressions": [on_the_node]}]}
            },
        },
    }


@pytest.fixture
def disk_pool(
    request: pytest.FixtureRequest,
    node_cluster: Any,
    jumpstarters: Any,
    local_disks: Path,
    tmp_path: Path,
) -> Iterator[Pool]:
    """A pool of one QEMU instance with the test's parameters (`request.param`)."""
    parameters, reclaim = request.param
    with fresh_pool(
        node_cluster,
        jumpstarters,
        tmp_path,
        name="disk",
        parameters=parameters,
        class_spec=TENTH_OF_A_CORE,  # a retained guest and its replacement: two at once
    ) as pool:
        if reclaim != "Delete":
            change = json.dumps({"spec": {"reclaimPolicy": reclaim}})
            pool.cluster.kubectl(
                "patch",
                "virtualtargetclass",
                "node",
                "-n",
                pool.namespace,
                "--type=merge",
                "-p",
                change,
            )
        pool.apply(drivers=pools.GUEST_DRIVERS, minAvailableReplicas=1, maxReplicas=1)
        pool.wait_warm(1, timeout=180)
        yield pool


# -- reading the cluster -----------------------------------------------------------------


def _get(pool: Pool, kind: str, name: str, *scope: str) -> Obj | None:
    found: Obj | None = find_json(pool.cluster, kind, name, *scope)
    return found


def _claim(pool: Pool, pod: str) -> Obj | None:
    return _get(pool, "pvc", f"{pod}-disk", "-n", pool.namespace)


def _only_instance(pool: Pool) -> tuple[Obj, Obj]:
    """The pool's one Exporter and its Pod."""
    (exporter,) = pool.exporters()
    name = exporter["metadata"]["name"]
    pod = _get(pool, "pod", name, "-n", pool.namespace)
    assert pod is not None, pool.describe()
    return exporter, pod


def _bound_volume(pool: Pool, pod: Obj) -> tuple[Obj, Obj]:
    """The Pod's claim, Bound and owned by the Pod, and its PersistentVolume."""
    name = pod["metadata"]["name"]
    claim = pool.wait(f"{name}-disk Bound", lambda: _bound(_claim(pool, name)), timeout=60)
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", name, pod["metadata"]["uid"])
    assert owner["controller"] is True
    # Made for the Pod: after it, by kube-controller-manager's ephemeral volume controller.
    assert claim["metadata"]["creationTimestamp"] >= pod["metadata"]["creationTimestamp"]
    assert claim["spec"]["storageClassName"] == STORAGE_CLASS
    assert claim["spec"]["resources"]["requests"] == {"storage": VOLUME}
    volume = _get(pool, "pv", claim["spec"]["volumeName"])
    assert volume is not None and volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    return claim, volume


def _bound(claim: Obj | None) -> Obj | None:
    return claim if claim and claim.get("status", {}).get("phase") == "Bound" else None


def _emptydir(pool: Pool, pod: Obj) -> Path:
    """Where the kubelet keeps the Pod's emptyDir `disk` on this machine."""
    uid = pod["metadata"]["uid"]
    return pool.cluster.workdir / "kubelet/root/pods" / uid / "volumes/kubernetes.io~empty-dir/disk"


def _lease(pool: Pool, tmp_path: Path, guest: Path, boots: int, where: Path) -> DiskSeen:
    """A real client's lease: flash the guest, boot it `boots` times; the disk the QEMU
    driver wrote under `where` meanwhile."""
    config = pool.jumpstarter.client_config("tester")
    run, seen = run_client_watching_disk(lambda: where, config, SELECTOR, guest, boots, tmp_path)
    assert run.code == 0, f"{run.output}\n{pool.instance_logs()}"
    assert run.count("marker") == boots, run.output
    assert seen.files, f"no guest disk seen under {where}\n{run.output}"
    # The flashed image, grown to the disk the pool names (1Gi: disk_size 1G, sparse).
    assert max(seen.files.values()) == 1 << 30, seen.files
    record_figure(
        f"{pool.namespace}: flash {run.at('flashed') - run.at('flash started'):.1f} s, "
        f"power-on -> marker {run.boot_times()}"
    )
    return seen


def _replaced(pool: Pool, old_uid: str) -> Obj:
    """The pool's instance once it is another than `old_uid`, warm."""

    def successor() -> Obj | None:
        exporters = pool.exporters()
        fresh = [e for e in exporters if e["metadata"]["uid"] != old_uid]
        return fresh[0] if len(exporters) == 1 and fresh and pool.warm(1) else None

    found: Obj = pool.wait("the successor warm", successor, timeout=180)
    return found


# -- the tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("disk_pool", [(ON_A_CLAIM, "Delete")], indirect=True, ids=["claim"])
def test_a_guest_on_a_storage_class_claim_boots_and_the_claim_goes_with_its_pod(
    disk_pool: Pool,
    marker_guest: Path,
    tmp_path: Path,
) -> None:
    pool = disk_pool
    exporter, pod = _only_instance(pool)
    (container,) = pod["spec"]["containers"]
    assert "ephemeral-storage" not in json.dumps(container.get("resources", {}))
    assert pod["spec"]["securityContext"] == {"fsGroup": 65532}
    claim, volume = _bound_volume(pool, pod)
    started = time.monotonic()
    seen = _lease(pool, tmp_path, marker_guest, 2, Path(volume["spec"]["local"]["path"]))
    (disk,) = seen.files
    assert disk.parent.parent == Path(volume["spec"]["local"]["path"])
    assert seen.groups[disk] == 65532  # the kubelet gave the volume the fsGroup

    released = time.monotonic()
    successor = _replaced(pool, exporter["metadata"]["uid"])
    pool.wait(
        "the released instance's claim gone",
        lambda: _claim(pool, pod["metadata"]["name"]) is None,
        timeout=120,
    )
    gone = time.monotonic()
    assert _get(pool, "pod", pod["metadata"]["name"], "-n", pool.namespace) is None
    pool.wait(  # a static volume's policy is Retain: kept for its administrator
        "the released claim's volume Released",
        lambda: (_get(pool, "pv", volume["metadata"]["name"]) or {}).get("status", {}).get("phase")
        == "Released",
    )
    new_pod = _get(pool, "pod", successor["metadata"]["name"], "-n", pool.namespace)
    assert new_pod is not None
    new_claim, new_volume = _bound_volume(pool, new_pod)
    assert new_volume["metadata"]["name"] != volume["metadata"]["name"]
    assert new_claim["metadata"]["uid"] != claim["metadata"]["uid"]
    record_figure(
        f"guest on claim {claim['metadata']['name']} ({volume['metadata']['name']}): lease "
        f"{released - started:.1f} s; release -> claim gone {gone - released:.1f} s; the "
        f"successor's claim on {new_volume['metadata']['name']}"
    )


@pytest.mark.parametrize("disk_pool", [(ON_A_CLAIM, "Retain")], indirect=True, ids=["retain"])
def test_a_retained_instance_keeps_its_claim_until_it_is_deleted(
    disk_pool: Pool,
    marker_guest: Path,
    tmp_path: Path,
) -> None:
    pool = disk_pool
    exporter, pod = _only_instance(pool)
    name = exporter["metadata"]["name"]
    claim, volume = _bound_volume(pool, pod)
    where = Path(volume["spec"]["local"]["path"])
    _lease(pool, tmp_path, marker_guest, 1, where)

    def retained() -> Obj | None:
        found = _get(pool, "exporter", name, "-n", pool.namespace)
        annotations = (found or {}).get("metadata", {}).get("annotations") or {}
        return found if annotations.get(RETAINED_FROM) == pool.name else None

    pool.wait("the released instance retained", retained, timeout=120)
    successor = _replaced(pool, exporter["metadata"]["uid"])
    # The retained instance's Pod is kept, so its claim, Bound to the same volume.
    kept_pod = _get(pool, "pod", name, "-n", pool.namespace)
    assert kept_pod is not None and kept_pod["metadata"]["uid"] == pod["metadata"]["uid"]
    kept = _bound(_claim(pool, name))
    assert kept is not None and kept["metadata"]["uid"] == claim["metadata"]["uid"]
    assert kept["spec"]["volumeName"] == volume["metadata"]["name"] and where.is_dir()
    left = DiskSeen()
    left.look(where)  # what 0.9.0's driver has not removed yet of its temporary directory
    new_pod = _get(pool, "pod", successor["metadata"]["name"], "-n", pool.namespace)
    assert new_pod is not None
    _bound_volume(pool, new_pod)  # the replacement: a claim of its own

    deleted = time.monotonic()
    pool.cluster.kubectl("delete", "exporter", name, "-n", pool.namespace, "--wait=false")
    pool.wait(
        "the retained claim gone with its instance",
        lambda: _claim(pool, name) is None,
        timeout=120,
    )
    assert _get(pool, "pod", name, "-n", pool.namespace) is None
    record_figure(
        f"retained {name}: claim {claim['metadata']['name']} kept after the lease "
        f"(the driver's disk files still on it: {len(left.files)}); instance deleted -> "
        f"claim gone {time.monotonic() - deleted:.1f} s"
    )


@pytest.mark.parametrize("disk_pool", [(ON_EMPTYDIR, "Delete")], indirect=True, ids=["emptydir"])
def test_a_guest_on_the_sized_emptydir_under_a_real_lease(
    disk_pool: Pool,
    marker_guest: Path,
    tmp_path: Path,
) -> None:
    pool = disk_pool
    exporter, pod = _only_instance(pool)
    (container,) = pod["spec"]["containers"]
    disk = next(v for v in pod["spec"]["volumes"] if v["name"] == "disk")
    assert disk == {"name": "disk", "emptyDir": {"sizeLimit": VOLUME}}
    assert container["resources"]["requests"]["ephemeral-storage"] == VOLUME
    assert container["resources"]["limits"] == {"ephemeral-storage": VOLUME}
    assert _claim(pool, pod["metadata"]["name"]) is None
    where = _emptydir(pool, pod)
    _lease(pool, tmp_path, marker_guest, 1, where)
    _replaced(pool, exporter["metadata"]["uid"])
    pool.wait("the released Pod's emptyDir removed", lambda: not where.exists(), timeout=120)
