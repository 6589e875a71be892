"""RBAC grants every API call the code declares, and nothing more."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml

from api.access import CLUSTER, MODES, NAMESPACED, Permission
from harness.deploy_render import WEBHOOK_NAMESPACE, render_overlay
from harness.rbac import (
    COMPONENTS,
    COMPONENTS_DIR,
    EXAMPLE_NAMESPACES,
    RBAC_DIR,
    SCOPE_COMPONENTS,
    generate,
    generate_scope,
    main,
    render_component,
    split,
)
from pool.model.access import ACCESS as RECONCILER_ACCESS
from pool.rendering.provisioners.qemu import POD_SECURITY_LEVEL

Grant = tuple[str, str, str, bool]  # group, resource, verb, only in the own namespace


def grants_of(permissions: tuple[Permission, ...], mode: str = CLUSTER) -> set[Grant]:
    """What the table grants in a cluster-wide install."""
    return {
        (p.api_group, p.resource, v, p.own_namespace)
        for p in permissions
        if p.applies(mode)
        for v in p.verbs
    }


def granted_to(objects: list[dict[str, Any]], account: str) -> set[Grant]:
    """What the rendered roles bound to `account` allow (own namespace: by a Role)."""
    return {(g, r, v, where is not None) for where, g, r, v in scoped_grants(objects, account)}


def test_committed_rbac_is_what_the_access_tables_generate() -> None:
    files = generate()
    on_disk = {p.name: p.read_text() for p in RBAC_DIR.glob("*.yaml")}
    assert on_disk == files, "deploy/base/rbac/ is stale: run `make crds`"
    for folder, namespaces in SCOPE_COMPONENTS.items():
        on_disk = {p.name: p.read_text() for p in (COMPONENTS_DIR / folder).glob("*.yaml")}
        assert on_disk == generate_scope(namespaces), f"deploy/components/{folder} is stale"
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
    assert files["demo.yaml"].startswith("# Generated by `python -m harness.rbac`")
    assert yaml.safe_load(files["kustomization.yaml"])["resources"] == ["demo.yaml"]


@pytest.mark.parametrize(
    "verbs, resource", [(("get", "fetch"), "pods"), ((), "pods"), (("get",), "Pods")]
)
def test_permission_refuses_unknown_verbs_and_bad_resources(
    verbs: tuple[str, ...], resource: str
) -> None:
    with pytest.raises(ValueError):
        Permission("", resource, verbs)


ScopedGrant = tuple[
    str | None, str, str, str
]  # namespace (None: cluster-wide), group, resource, verb


def scoped_grants(objects: list[dict[str, Any]], account: str) -> set[ScopedGrant]:
    """What the rendered roles bound to `account` allow, and where."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    found: set[ScopedGrant] = set()
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = {(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]}
        if ("ServiceAccount", account, WEBHOOK_NAMESPACE) not in subjects:
            continue
        where = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else None, ref["name"])]
        assert all("resourceNames" not in r and "nonResourceURLs" not in r for r in role["rules"])
        found |= {
            (where, g, r, v)
            for rule in role["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
        }
    return found


def expected(mode: str, namespaces: tuple[str, ...]) -> set[ScopedGrant]:
    cluster, roles = split(RECONCILER_ACCESS, mode, namespaces)
    grants: set[ScopedGrant] = {
        (None, p.api_group, p.resource, v) for p in cluster for v in p.verbs
    }
    for namespace, permissions in roles.items():
        grants |= {(namespace, p.api_group, p.resource, v) for p in permissions for v in p.verbs}
    return grants


def secret_reads_cluster_wide(grants: set[ScopedGrant]) -> set[ScopedGrant]:
    return {g for g in grants if g[0] is None and g[2] == "secrets" and g[3] in ("list", "watch")}


@pytest.mark.parametrize("mode", MODES)
def test_no_mode_of_the_access_table_lists_or_watches_secrets_cluster_wide(mode: str) -> None:
    """RBAC cannot restrict a list or watch by label: a cluster-wide one reads every
    Secret in the cluster. Neither mode's ClusterRole may hold one."""
    cluster, _ = split(RECONCILER_ACCESS, mode, ("lab-a",))
    bad = [p for p in cluster if p.resource == "secrets" and {"list", "watch"} & set(p.verbs)]
    assert bad == []
    objects = render_component("reconciler", RECONCILER_ACCESS, mode, ("lab-a", "lab-b"))
    assert secret_reads_cluster_wide(scoped_grants(objects, "virtualtarget-reconciler")) == set()


def test_the_check_catches_a_table_that_would_list_secrets_cluster_wide() -> None:
    table = (Permission("", "secrets", ("get", "list", "watch")),)
    cluster, _ = split(table, CLUSTER, ())
    objects = render_component("demo", table)
    assert secret_reads_cluster_wide(scoped_grants(objects, "virtualtarget-demo")) == {
        (None, "", "secrets", "list"),
        (None, "", "secrets", "watch"),
    }
    assert [p.resource for p in cluster] == ["secrets"]


@pytest.mark.parametrize(
    "folder, pools",
    [("scope-namespace", (WEBHOOK_NAMESPACE,)), ("scope-namespaces", EXAMPLE_NAMESPACES)],
)
def test_each_scope_component_grants_exactly_that_scope(
    folder: str, pools: tuple[str, ...]
) -> None:
    objects = render_overlay("self-signed", components=[folder])
    granted = scoped_grants(objects, "virtualtarget-reconciler")
    assert granted == expected(NAMESPACED, pools)
    assert secret_reads_cluster_wide(granted) == set()
    # Secrets are listed and watched only in the pools' namespaces, and nothing but the
    # reviews is granted cluster-wide.
    assert {g[0] for g in granted if g[2] == "secrets" and g[3] == "watch"} == set(pools)
    assert {(g[1], g[2]) for g in granted if g[0] is None} == {
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    }
    (deployment,) = [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "virtualtarget-reconciler"
    ]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    enforced = namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    # the pools' Pods (root for /dev/kvm) run in the product's namespace only in the first
    assert enforced == (POD_SECURITY_LEVEL if folder == "scope-namespace" else "restricted")
    if folder == "scope-namespace":
        assert {
            "name": "NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        } in container["env"]
    else:
        assert f"--namespace={','.join(pools)}" in container["args"]


def test_the_cluster_wide_install_reads_secrets_by_name_only() -> None:
    granted = scoped_grants(render_overlay("self-signed"), "virtualtarget-reconciler")
    assert granted == expected(CLUSTER, ())
    assert {g[3] for g in granted if g[2] == "secrets"} == {"get", "create", "update"}


@pytest.mark.parametrize("components", [[], ["scope-namespace"], ["scope-namespaces"]])
def test_the_webhook_may_read_no_secret(components: list[str]) -> None:
    """Admission checks nothing a Secret holds (a class's credentials are the reconciler's
    to report): no role bound to the webhook names `secrets`, with any verb, anywhere."""
    assert [p for p in declared("webhook") if p.resource.startswith("secrets")] == []
    objects = render_overlay("self-signed", components=components)
    granted = scoped_grants(objects, "virtualtarget-webhook")
    assert granted and {g for g in granted if g[2].startswith("secrets")} == set()


def test_a_component_for_your_namespaces_is_written_where_asked(tmp_path: Any) -> None:
    assert main(["--namespaces", "team-x,team-y", "--out", str(tmp_path / "mine")]) == 0
    written = {p.name: p.read_text() for p in (tmp_path / "mine").glob("*.yaml")}
    assert written == generate_scope(("team-x", "team-y"))
    roles = [o for o in yaml.safe_load_all(written["roles.yaml"]) if o["kind"] == "Role"]
    assert [r["metadata"]["namespace"] for r in roles] == ["team-x", "team-y"]
    with pytest.raises(SystemExit):
        main(["--namespaces", "Not_A_Namespace", "--out", str(tmp_path / "bad")])
