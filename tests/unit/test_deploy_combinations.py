"""No documented way to install drops a security setting.

Every shipped overlay, alone and with every combination of components docs/install.md
allows, is rendered through the page's own overlay (its `deploy/overlays/mine` block with
the overlay and components put in), and so is each of the page's overlay blocks as it
stands. Each render must carry the image allow-list in every Deployment, the Pod Security
label of the product's namespace, and exactly the RBAC the access tables generate for its
scope, with no other subject bound.
"""

from __future__ import annotations

import itertools
import re
from functools import cache
from typing import Any

import pytest
import yaml

from api.access import CLUSTER, NAMESPACED
from api.imagepolicy import ImagePolicy, from_flags
from api.jumpstarter import JUMPSTARTER_REPOSITORIES
from api.provisioners import DEFAULT_IMAGES
from harness.deploy_render import (
    DEPLOY,
    OVERLAYS,
    WEBHOOK_NAMESPACE,
    container_args,
    render_kustomization,
)
from harness.rbac import COMPONENTS, RECONCILERS, SCOPE_COMPONENTS
from pool.rendering.provisioners import RECONCILER_ACCESS
from pool.rendering.provisioners.qemu import POD_SECURITY_LEVEL
from tests.docpages import files
from tests.installpage import OWN_OVERLAY_FILE, PAGE
from tests.unit.test_deploy_rbac import (
    declared,
    expected,
    granted_to,
    grants_of,
    scoped_grants,
    secret_reads_cluster_wide,
)
from virtualtarget.cli import _parser_for

Obj = dict[str, Any]

# What every shipped overlay already holds: the allow-list itself.
IN_EVERY_OVERLAY = "jumpstarter-images"
# The component of overlays/webhook-self-signed alone (tests/unit/test_deploy_webhook_only.py).
OF_ONE_OVERLAY = "webhook-only"
# The page's rules for combining components (its table's last column).
SCOPES = tuple(SCOPE_COMPONENTS)
HAS_EXPORTER_CRD = {"self-signed-exporter-crd": "exporter-crd"}
# component -> the optional reconciler it adds, which serves every namespace: no scope
WHOLE_CLUSTER_ONLY = {"kubevirt": "kubevirt-reconciler"}
DEPLOYMENTS = ("virtualtarget-webhook", "virtualtarget-reconciler")
PROMETHEUS = ("ServiceAccount", "prometheus-k8s", "monitoring")  # the component's subject
ELSEWHERE = "registry.example.com/lab/qemu-runtime:1"


def documented_components() -> list[str]:
    """The components the page's table under "Your own overlay" lists, in its order."""
    section = PAGE.read_text().split("\n## Your own overlay\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z-]+)` \|", section, re.M)


def combinations(overlay: str) -> list[tuple[str, ...]]:
    addable = [c for c in documented_components() if c != HAS_EXPORTER_CRD.get(overlay)]
    return [
        combo
        for size in range(len(addable) + 1)
        for combo in itertools.combinations(addable, size)
        if sum(c in SCOPES for c in combo) <= 1
        and not (set(combo) & set(SCOPES) and set(combo) & set(WHOLE_CLUSTER_ONLY))
    ]


CASES = [(overlay, combo) for overlay in OVERLAYS for combo in combinations(overlay)]


def own_overlay(overlay: str, components: tuple[str, ...]) -> Obj:
    """The page's first `deploy/overlays/mine` block, over `overlay`, with `components`."""
    document: Obj = yaml.safe_load(files(PAGE, OWN_OVERLAY_FILE)[0].text)
    document["resources"] = [f"../{overlay}"]
    document["components"] = [f"../../components/{c}" for c in components]
    return document


@cache
def rendered(overlay: str, components: tuple[str, ...]) -> tuple[Obj, ...]:
    return tuple(render_kustomization(own_overlay(overlay, components)))


def test_the_page_lists_every_optional_component_and_its_block_has_the_shape_filled_in() -> None:
    on_disk = {p.name for p in (DEPLOY / "components").iterdir() if p.is_dir()}
    assert set(documented_components()) == on_disk - {IN_EVERY_OVERLAY, OF_ONE_OVERLAY}
    first = yaml.safe_load(files(PAGE, OWN_OVERLAY_FILE)[0].text)
    assert set(first) == {"apiVersion", "kind", "resources", "components"}
    assert first["resources"] == ["../self-signed"]
    print(f"{len(CASES)} combinations: {', '.join(f'{o}+{list(c)}' for o, c in CASES)}")


def deployments(components: tuple[str, ...]) -> tuple[str, ...]:
    """The Deployments a render with `components` holds."""
    added = (WHOLE_CLUSTER_ONLY[c] for c in components if c in WHOLE_CLUSTER_ONLY)
    return (*DEPLOYMENTS, *(f"virtualtarget-{c}" for c in added))


def policy_of(objects: tuple[Obj, ...] | list[Obj], deployment: str) -> ImagePolicy:
    args = container_args(list(objects), deployment)
    policy = from_flags(_parser_for(args).parse_args(args))
    assert policy is not None, f"{deployment}: no image allow-list in {args}"
    assert f"--allowed-image-prefixes={JUMPSTARTER_REPOSITORIES}" in args, args
    for reference in DEFAULT_IMAGES["qemu.jumpstarter.dev"].values():
        assert policy.refusal(reference) is None
    return policy


def pod_security(objects: tuple[Obj, ...] | list[Obj]) -> str:
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == WEBHOOK_NAMESPACE
    level: str = namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    return level


def assert_rbac(objects: tuple[Obj, ...] | list[Obj], components: tuple[str, ...]) -> None:
    objects = list(objects)
    (scope,) = [c for c in components if c in SCOPES] or [None]
    if scope is None:
        mode, pools = CLUSTER, ()
    else:
        mode, pools = NAMESPACED, SCOPE_COMPONENTS[scope] or (WEBHOOK_NAMESPACE,)
    reconciler = scoped_grants(objects, "virtualtarget-reconciler")
    assert reconciler == expected(mode, pools)
    assert secret_reads_cluster_wide(reconciler) == set()
    added = tuple(WHOLE_CLUSTER_ONLY[c] for c in components if c in WHOLE_CLUSTER_ONLY)
    for component in added:
        table = RECONCILER_ACCESS[RECONCILERS[component]]
        assert granted_to(objects, f"virtualtarget-{component}") == grants_of(table)
    assert granted_to(objects, "virtualtarget-webhook") == grants_of(declared("webhook"))
    (reader,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "virtualtarget-metrics-reader"
    ]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    # No subject but the components' (an optional reconciler's with its component) and,
    # with monitoring, Prometheus's; Prometheus gets the metrics reader and the discovery
    # Role, which only reads.
    ours = {
        ("ServiceAccount", f"virtualtarget-{c}", WEBHOOK_NAMESPACE) for c in (*COMPONENTS, *added)
    }
    allowed = ours | ({PROMETHEUS} if "monitoring" in components else set())
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = {(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]}
        assert subjects <= allowed, binding["metadata"]
        if PROMETHEUS in subjects:
            assert subjects == {PROMETHEUS}
            ref = binding["roleRef"]
            assert (ref["kind"], ref["name"]) in {
                ("ClusterRole", "virtualtarget-metrics-reader"),
                ("Role", "virtualtarget-prometheus-discovery"),
            }
    for role in (
        o for o in objects if o["metadata"]["name"] == "virtualtarget-prometheus-discovery"
    ):
        if role["kind"] == "Role":
            assert {v for r in role["rules"] for v in r["verbs"]} == {"get", "list", "watch"}


@pytest.mark.parametrize(
    ("overlay", "components"), CASES, ids=[f"{o}+{'+'.join(c)}" for o, c in CASES]
)
def test_every_documented_combination_keeps_the_allow_list_pod_security_and_rbac(
    overlay: str, components: tuple[str, ...]
) -> None:
    objects = rendered(overlay, components)
    for deployment in deployments(components):
        policy = policy_of(objects, deployment)
        assert policy.refusal(ELSEWHERE) is not None
    # The pools' Pods (root for /dev/kvm) run in the product's namespace only when the
    # reconciler serves that namespace alone.
    level = POD_SECURITY_LEVEL if "scope-namespace" in components else "restricted"
    assert pod_security(objects) == level
    assert_rbac(objects, components)
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    with_exporter_crd = "exporter-crd" in components or overlay in HAS_EXPORTER_CRD
    assert ("exporters.jumpstarter.dev" in crds) == with_exporter_crd


@pytest.mark.parametrize("index", range(len(files(PAGE, OWN_OVERLAY_FILE))))
def test_each_own_overlay_on_the_page_keeps_them_as_written(index: int) -> None:
    block = files(PAGE, OWN_OVERLAY_FILE)[index]
    document = yaml.safe_load(block.text)
    objects = render_kustomization(document)
    components = tuple(c.rsplit("/", 1)[-1] for c in document.get("components", []))
    for deployment in deployments(components):
        policy = policy_of(objects, deployment)
        added = {p for p in policy.prefixes if p != JUMPSTARTER_REPOSITORIES}
        # Only a registry the block itself adds is allowed beyond Jumpstarter's.
        assert (policy.refusal(ELSEWHERE) is None) == any(ELSEWHERE.startswith(p) for p in added)
        assert policy.refusal("docker.io/library/busybox:1") is not None
    assert pod_security(objects) == "restricted"
    assert_rbac(objects, components)
