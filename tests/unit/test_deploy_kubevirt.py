"""The component `deploy/components/kubevirt`: the KubeVirt reconciler beside the QEMU one,
with the QEMU reconciler's Pod settings, a Lease, ServiceAccount and RBAC of its own."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest

from api.access import CLUSTER
from harness.deploy_render import OVERLAYS, WEBHOOK_NAMESPACE, container_args, render_overlay
from harness.rbac import COMPONENTS_DIR, OPTIONAL_RBAC, RECONCILERS, generate
from pool.rendering.provisioners import RECONCILER_ACCESS
from reconciler.cli import election_lease
from tests.unit.test_deploy_rbac import granted_to, grants_of, scoped_grants
from virtualtarget.cli import _parser_for

Obj = dict[str, Any]
COMPONENT = "kubevirt"
QEMU, KUBEVIRT = "virtualtarget-reconciler", "virtualtarget-kubevirt-reconciler"
NAME_LABEL = "app.kubernetes.io/name"


@cache
def rendered(overlay: str) -> tuple[Obj, ...]:
    return tuple(render_overlay(overlay, components=[COMPONENT]))


def one(objects: tuple[Obj, ...], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def _renamed(deployment: Obj) -> Obj:
    """The Deployment with what the component changes put back to the QEMU reconciler's."""
    copied = copy.deepcopy(deployment)
    copied["metadata"]["name"] = QEMU
    del copied["metadata"]["labels"][NAME_LABEL]  # on every object of the component
    spec = copied["spec"]
    spec["selector"]["matchLabels"][NAME_LABEL] = QEMU
    pod = spec["template"]
    pod["metadata"]["labels"][NAME_LABEL] = QEMU
    pod["spec"]["serviceAccountName"] = QEMU
    for term in pod["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]:
        term["podAffinityTerm"]["labelSelector"]["matchLabels"][NAME_LABEL] = QEMU
    args = pod["spec"]["containers"][0]["args"]
    args[args.index(f"--provisioner={RECONCILERS['kubevirt-reconciler']}")] = (
        f"--provisioner={RECONCILERS['reconciler']}"
    )
    return copied


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_kubevirt_reconciler_is_the_qemu_one_renamed_running_kubevirt(overlay: str) -> None:
    objects = rendered(overlay)
    qemu, kubevirt = (one(objects, "Deployment", name) for name in (QEMU, KUBEVIRT))
    # Replicas (one leads), strategy, security contexts, probes, resources, volumes and
    # the overlay's image allow-list: all as the QEMU reconciler's.
    assert _renamed(kubevirt) == qemu
    assert kubevirt["spec"]["replicas"] == 2
    for kind, name in (
        ("ServiceAccount", KUBEVIRT),
        ("PodDisruptionBudget", KUBEVIRT),
        ("Service", f"{KUBEVIRT}-metrics"),
    ):
        assert one(objects, kind, name)["metadata"]["namespace"] == WEBHOOK_NAMESPACE
    assert one(objects, "PodDisruptionBudget", KUBEVIRT)["spec"]["minAvailable"] == 1
    assert (
        one(objects, "Service", f"{KUBEVIRT}-metrics")["spec"]["ports"]
        == one(objects, "Service", f"{QEMU}-metrics")["spec"]["ports"]
    )
    # Everything the component adds carries the product's label.
    for obj in objects:
        if obj["metadata"].get("labels", {}).get(NAME_LABEL) == KUBEVIRT:
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "virtualtarget"


def test_neither_reconcilers_budget_service_or_affinity_selects_the_others_pods() -> None:
    objects = rendered("self-signed")
    pods = {
        name: one(objects, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        for name in (QEMU, KUBEVIRT)
    }
    for name, other in ((QEMU, KUBEVIRT), (KUBEVIRT, QEMU)):
        selectors = [
            one(objects, "PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"],
            one(objects, "Service", f"{name}-metrics")["spec"]["selector"],
            one(objects, "Deployment", name)["spec"]["selector"]["matchLabels"],
        ]
        for selector in selectors:
            assert selector.items() <= pods[name].items()
            assert not selector.items() <= pods[other].items()


def test_each_reconciler_runs_its_provisioner_and_leads_its_own_lease() -> None:
    objects = list(rendered("self-signed"))
    leases = {}
    for component, provisioner in RECONCILERS.items():
        args = container_args(objects, f"virtualtarget-{component}")
        parsed = _parser_for(args).parse_args(args)
        assert parsed.provisioner == provisioner
        assert parsed.leader_election_id is None  # the provisioner's default
        assert not parsed.no_leader_election
        leases[component] = election_lease(parsed)
    assert leases == {
        "reconciler": "exporterset-reconciler",
        "kubevirt-reconciler": "exporter-set-controller-kubevirt.jumpstarter.dev",
    }


@pytest.mark.parametrize("overlay", ("self-signed", "cert-manager"))
def test_its_rbac_is_exactly_its_generated_table(overlay: str) -> None:
    objects = list(rendered(overlay))
    for component, provisioner in RECONCILERS.items():
        granted = granted_to(objects, f"virtualtarget-{component}")
        assert granted == grants_of(RECONCILER_ACCESS[provisioner], CLUSTER)
    # Both read Secrets by name only (the class's kubeconfig Secret too): none listed or
    # watched, and nothing but its leader Lease confined to the product's namespace.
    grants = scoped_grants(objects, KUBEVIRT)
    assert {g[3] for g in grants if g[2] == "secrets"} == {"get", "create", "update"}
    assert {(g[0], g[2]) for g in grants if g[0] is not None} == {(WEBHOOK_NAMESPACE, "leases")}


def test_its_generated_rbac_is_committed_beside_it() -> None:
    (folder,) = OPTIONAL_RBAC.values()
    assert folder.is_relative_to(COMPONENTS_DIR / COMPONENT)
    component = "kubevirt-reconciler"
    files = generate({component: RECONCILER_ACCESS[RECONCILERS[component]]})
    assert {p.name: p.read_text() for p in folder.glob("*.yaml")} == files
    assert all(t.startswith("# Generated by `python -m harness.rbac`") for t in files.values())


def test_without_the_component_nothing_of_it_is_rendered() -> None:
    names = {o["metadata"]["name"] for o in render_overlay("self-signed")}
    assert not {n for n in names if "kubevirt" in n}
