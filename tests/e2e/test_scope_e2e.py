"""Each install scope under the RBAC generated for it, with the reconciler's own token.

For the whole cluster, one namespace (the reconciler's own, `NAMESPACE` set as its
Deployment does) and a listed set of namespaces, the RBAC `harness.rbac` renders
for that scope is applied for a ServiceAccount of the test's own, and the reconciler runs
with a TokenRequest token of it. Then:

- a Secret outside what the scope may read cannot be read with that token: `kubectl auth
  can-i` says no and a real GET (or, cluster-wide, LIST) gets 403;
- pools in the scope fill, pools outside it are left alone;
- a rotated token reaches the instance's config Secret; the time it took is printed
  beside the scope's stated bound (a watch: seconds; by name: the resync's floor plus
  Secrets / budget).

Each namespace of pools in the scope is served by a Jumpstarter released 0.9.0 controller
of its own (one serves one namespace; two at once for the listed scope): it issues the
instances' credentials, and rotates one as it does (its Secret deleted, a new one issued).
The namespace outside the scope is served by none: its pool gets no Exporter at all, which
needs no credential.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from api.access import CLUSTER, NAMESPACED
from harness.controlplane import ControlPlane, running_control_plane
from harness.deploy_render import WEBHOOK_NAMESPACE
from harness.jumpstarter import running_jumpstarter
from harness.rbac import render_component
from harness.stack import running_reconciler
from pool.model.access import ACCESS
from pool.model.jumpstarter import config_secret_name
from pool.model.keys import instance_selector
from pool.rendering.provisioners.qemu import POD_SECURITY_LEVEL
from tests.e2e.objects import (
    apply,
    exporter_set,
    get_json,
    rotate_credential,
    virtual_target_class,
    wait_for,
)

RESYNC = 4.0  # --secret-resync of the cluster-wide run (the resync's floor per Secret)
WATCH_BOUND = 5.0  # what docs/install.md states for a watch: an event and a pass, within seconds


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    """A plane of this module's own: the cluster-wide reconciler takes every pool it finds
    and reads each instance's Secrets by name, so the pools other tests left on the
    session's plane would be its work too, and would stretch its resync past the bound."""
    with running_control_plane() as plane:
        yield plane


@dataclass(frozen=True)
class Case:
    mode: str
    own_namespace: bool  # the one-namespace install: pools beside the reconciler
    listed: int  # namespaces of pools in the scope (listed mode), else 0


CASES = {
    "cluster": Case(CLUSTER, False, 0),
    "namespace": Case(NAMESPACED, True, 0),
    "namespaces": Case(NAMESPACED, False, 2),
}


def _namespace(plane: ControlPlane, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    plane.kubectl("create", "namespace", name)
    return name


def _as_list(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def _kubectl_as(
    plane: ControlPlane, kubeconfig: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(plane.binaries["kubectl"]), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _token(kubeconfig: Path) -> str:
    for line in kubeconfig.read_text().splitlines():
        if line.strip().startswith("token:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no token in the kubeconfig")


def _http_get(plane: ControlPlane, token: str, path: str) -> int:
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    context.check_hostname = False  # the apiserver's self-signed certificate names its host
    request = urllib.request.Request(
        plane.server + path, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def _pool(plane: ControlPlane, namespace: str, name: str) -> None:
    apply(
        plane,
        virtual_target_class(name, namespace),
        exporter_set(
            name, namespace, class_name=name, with_template=True, minReplicas=1, maxReplicas=2
        ),
    )


def _instance(plane: ControlPlane, namespace: str, set_name: str) -> str:
    """The name of the set's one Exporter ("" while there is none): names are generated."""
    items = get_json(plane, "exporters", "-n", namespace, "-l", instance_selector(set_name))[
        "items"
    ]
    return str(items[0]["metadata"]["name"]) if len(items) == 1 else ""


def _config_version(plane: ControlPlane, namespace: str, exporter: str) -> str:
    found = plane.kubectl(
        "get", "secret", config_secret_name(exporter), "-n", namespace, "-o", "json", check=False
    )
    if found.returncode != 0:
        return ""
    return str(json.loads(found.stdout)["metadata"]["resourceVersion"])


@pytest.mark.parametrize("scope", sorted(CASES))
def test_scope_reads_only_what_it_may_and_fills_only_its_pools(
    control_plane: ControlPlane, tmp_path: Path, scope: str
) -> None:
    plane, case = control_plane, CASES[scope]
    plane.kubectl("create", "namespace", WEBHOOK_NAMESPACE, check=False)
    if case.own_namespace:
        # What deploy/components/scope-namespace does to the product's namespace, where
        # the pools' Pods now run (the rest of the component is the RBAC below).
        label = f"pod-security.kubernetes.io/enforce={POD_SECURITY_LEVEL}"
        plane.kubectl("label", "namespace", WEBHOOK_NAMESPACE, label, "--overwrite")
    tag = secrets.token_hex(3)
    component = f"reconciler-{scope}-{tag}"
    account = f"virtualtarget-{component}"
    pools = (
        [WEBHOOK_NAMESPACE]
        if case.own_namespace
        else [_namespace(plane, f"in-{i}") for i in range(case.listed or 1)]
    )
    outside = _namespace(plane, "outside")
    rbac = render_component(component, ACCESS, case.mode, pools if case.mode == NAMESPACED else ())
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": WEBHOOK_NAMESPACE},
    }
    plane.kubectl("apply", "-f", "-", input=_as_list([service_account, *rbac]))
    kubeconfig = plane.service_account_kubeconfig(
        WEBHOOK_NAMESPACE, account, tmp_path / "reconciler.kubeconfig"
    )
    token = _token(kubeconfig)

    # A Secret outside what the scope may read.
    plane.kubectl("create", "secret", "generic", "unrelated", "-n", outside, "--from-literal=k=v")
    if case.mode == CLUSTER:
        # Cluster-wide: Secrets by name only; no list or watch anywhere.
        for verb in ("list", "watch"):
            answer = _kubectl_as(plane, kubeconfig, "auth", "can-i", verb, "secrets", "-A")
            assert answer.stdout.strip() == "no", (verb, answer.stdout, answer.stderr)
        assert _http_get(plane, token, "/api/v1/secrets") == 403
        assert _http_get(plane, token, f"/api/v1/namespaces/{outside}/secrets") == 403
    else:
        for verb in ("get", "list", "watch"):
            answer = _kubectl_as(plane, kubeconfig, "auth", "can-i", verb, "secrets", "-n", outside)
            assert answer.stdout.strip() == "no", (verb, answer.stdout, answer.stderr)
        assert _http_get(plane, token, f"/api/v1/namespaces/{outside}/secrets/unrelated") == 403
        assert _http_get(plane, token, "/api/v1/secrets") == 403
        for namespace in pools:  # what the scope does grant, for contrast
            answer = _kubectl_as(
                plane, kubeconfig, "auth", "can-i", "watch", "secrets", "-n", namespace
            )
            assert answer.stdout.strip() == "yes"

    name = f"p{tag}"
    for namespace in [*pools, outside]:
        _pool(plane, namespace, name)
    extra = [
        f"--leader-election-namespace={WEBHOOK_NAMESPACE}",
        f"--leader-election-id=scope-{tag}",
        f"--secret-resync={RESYNC}",
    ]
    environment: dict[str, str] = {}
    if case.own_namespace:
        environment["NAMESPACE"] = WEBHOOK_NAMESPACE
    elif case.mode == NAMESPACED:
        extra.append(f"--namespace={','.join(pools)}")
    with contextlib.ExitStack() as served:
        for namespace in pools:  # Jumpstarter's controller for each namespace in the scope
            served.enter_context(
                running_jumpstarter(plane, namespace, tmp_path / f"jumpstarter-{namespace}")
            )
        with running_reconciler(
            plane, tmp_path, kubeconfig=kubeconfig, extra=extra, env=environment
        ) as reconciler:

            def filled() -> bool:
                reconciler.check_alive()
                for ns in pools:
                    exporter = _instance(plane, ns, name)
                    if not exporter or not _config_version(plane, ns, exporter):
                        return False
                    if plane.kubectl("get", "pod", exporter, "-n", ns, check=False).returncode:
                        return False
                return True

            wait_for(f"the pools in scope ({scope}) filled", filled, timeout=90)
            namespace = pools[0]
            instance = _instance(plane, namespace, name)
            before = _config_version(plane, namespace, instance)
            rotate_credential(plane, namespace, instance)
            started = time.monotonic()  # from the new credential on: the reconciler's part
            wait_for(
                "the rotated token in the config Secret",
                lambda: _config_version(plane, namespace, instance) != before,
                timeout=60,
            )
            took = time.monotonic() - started
            bound = (
                f"the resync: {RESYNC:.0f} s + Secrets / budget, and a pass"
                if case.mode == CLUSTER
                else f"{WATCH_BOUND:.0f} s: a watch event and a pass"
            )
            print(f"\nscope {scope}: rotated token in the config Secret after {took:.2f} s")
            print(f"  (bound: {bound})")
            log = reconciler.log_tail(300)
    if case.mode == NAMESPACED:
        # Outside the scope: no instance, no status, however long it ran.
        assert get_json(plane, "exporters", "-n", outside)["items"] == []
        assert "status" not in get_json(plane, "exporterset", name, "-n", outside)
    assert "forbidden" not in log.lower(), log
