"""RBAC grants every API call the code declares, and nothing more."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml

from api.access import Permission
from virtualtarget.deploy_render import WEBHOOK_NAMESPACE, render_overlay
from virtualtarget.rbac import COMPONENTS, RBAC_DIR, generate, main, render_component

Grant = tuple[str, str, str, bool]  # group, resource, verb, only in the own namespace


def grants_of(permissions: tuple[Permission, ...]) -> set[Grant]:
    return {(p.api_group, p.resource, v, p.own_namespace) for p in permissions for v in p.verbs}


def granted_to(objects: list[dict[str, Any]], account: str) -> set[Grant]:
    """What the rendered roles bound to `account` allow."""
    roles = {
        (o["kind"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    grants: set[Grant] = set()
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = {(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]}
        if ("ServiceAccount", account, WEBHOOK_NAMESPACE) not in subjects:
            continue
        ref = binding["roleRef"]
        own = binding["kind"] == "RoleBinding"
        for rule in roles[(ref["kind"], ref["name"])]["rules"]:
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule
            grants |= {
                (g, r, v, own)
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    return grants


def test_committed_rbac_is_what_the_access_tables_generate() -> None:
    files = generate()
    on_disk = {p.name: p.read_text() for p in RBAC_DIR.glob("*.yaml")}
    assert on_disk == files, "deploy/base/rbac/ is stale: run `make crds`"
    assert main(["--check"]) == 0


def declared(component: str) -> tuple[Permission, ...]:
    """The component's ACCESS table; a component without one yet declares no calls."""
    try:
        module = importlib.import_module(COMPONENTS[component])
    except ModuleNotFoundError as err:
        assert err.name == COMPONENTS[component], err
        return ()
    access: tuple[Permission, ...] = module.ACCESS
    return access


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_rendered_rbac_grants_exactly_the_declared_calls(component: str) -> None:
    for overlay in ("self-signed", "cert-manager"):
        granted = granted_to(render_overlay(overlay), f"virtualtarget-{component}")
        assert granted == grants_of(declared(component))


def test_each_deployment_runs_as_a_component_account_whose_rbac_is_generated() -> None:
    objects = render_overlay("self-signed")
    accounts = {
        o["spec"]["template"]["spec"]["serviceAccountName"]
        for o in objects
        if o["kind"] == "Deployment"
    }
    assert accounts == {f"virtualtarget-{c}" for c in COMPONENTS}
    for account in accounts:
        assert any(
            o["kind"] == "ServiceAccount" and o["metadata"]["name"] == account for o in objects
        )


def test_generator_splits_cluster_wide_and_own_namespace_calls_and_merges_verbs() -> None:
    table = (
        Permission("virtualtarget.jumpstarter.dev", "exportersets", ("get", "list")),
        Permission("virtualtarget.jumpstarter.dev", "exportersets", ("watch", "get")),
        Permission("virtualtarget.jumpstarter.dev", "exportersets/status", ("update",)),
        Permission("", "pods", ("create", "delete")),
        Permission(
            "coordination.k8s.io", "leases", ("get", "create", "update"), own_namespace=True
        ),
    )
    objects = render_component("demo", table)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ClusterRole", "virtualtarget-demo"),
        ("ClusterRoleBinding", "virtualtarget-demo"),
        ("Role", "virtualtarget-demo"),
        ("RoleBinding", "virtualtarget-demo"),
    ]
    cluster_role, _, role, binding = objects
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},
        {
            "apiGroups": ["virtualtarget.jumpstarter.dev"],
            "resources": ["exportersets"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["virtualtarget.jumpstarter.dev"],
            "resources": ["exportersets/status"],
            "verbs": ["update"],
        },
    ]
    assert role["metadata"]["namespace"] == WEBHOOK_NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["create", "get", "update"],
        }
    ]
    assert granted_to(objects, "virtualtarget-demo") == grants_of(table)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "virtualtarget-demo", "namespace": WEBHOOK_NAMESPACE}
    ]


def test_generated_files_say_where_they_come_from() -> None:
    files = generate({"demo": (Permission("", "events", ("create",)),)})
    assert files["demo.yaml"].startswith("# Generated by `python -m virtualtarget.rbac`")
    assert yaml.safe_load(files["kustomization.yaml"])["resources"] == ["demo.yaml"]


@pytest.mark.parametrize(
    "verbs, resource", [(("get", "fetch"), "pods"), ((), "pods"), (("get",), "Pods")]
)
def test_permission_refuses_unknown_verbs_and_bad_resources(
    verbs: tuple[str, ...], resource: str
) -> None:
    with pytest.raises(ValueError):
        Permission("", resource, verbs)
