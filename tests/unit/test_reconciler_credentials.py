"""An instance's credentials: what Jumpstarter's controller issued, the CA its class trusts,
and what the Secret and ConfigMap caches keep of a cluster's objects."""

from __future__ import annotations

import base64
from typing import Any

from pool.rendering.configsync import kept_data
from pool.rendering.credentials import (
    NOT_ISSUED,
    ca_source,
    keep_certificates,
    keep_credentials,
    resolve,
)
from pool.rendering.render import Credentials

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def exporter(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pool-0", "namespace": "ns"}, "status": status}


ISSUED = exporter(credential={"name": "pool-0-token"}, endpoint="grpc.example.com:443")
TOKEN = {"metadata": {"name": "pool-0-token"}, "data": {"token": b64("t0k3n\n")}}
DEFAULT_CA = {"metadata": {"name": "jumpstarter-service-ca-cert"}, "data": {"ca.crt": PEM}}


def lookup(*objects: dict[str, Any]) -> Any:
    by_name = {o["metadata"]["name"]: o for o in objects}
    return lambda _namespace, name: by_name.get(name)


def test_nothing_issued_yet() -> None:
    assert resolve(exporter(), {}, lookup(), lookup()) == NOT_ISSUED
    no_endpoint = exporter(credential={"name": "pool-0-token"})
    assert resolve(no_endpoint, {}, lookup(TOKEN), lookup()) == NOT_ISSUED


def test_the_token_comes_from_the_named_secret() -> None:
    assert resolve(ISSUED, {}, lookup(), lookup()) == 'Secret "pool-0-token" not found'
    empty = {"metadata": {"name": "pool-0-token"}, "data": {"other": b64("x")}}
    assert resolve(ISSUED, {}, lookup(empty), lookup()) == (
        'Secret "pool-0-token" has no key "token"'
    )
    assert resolve(ISSUED, {}, lookup(TOKEN), lookup(DEFAULT_CA)) == Credentials(
        "grpc.example.com:443", "t0k3n", b64(PEM)
    )


def test_the_ca_is_the_class_reference_else_the_jumpstarter_default_else_system_roots() -> None:
    named = {"spec": {"caBundleConfigMapRef": {"name": "corp-ca"}}}
    assert ca_source(named) == ("corp-ca", "ca-bundle.crt", True)  # the schema's default key
    assert ca_source({}) == ("jumpstarter-service-ca-cert", "ca.crt", False)
    assert resolve(ISSUED, named, lookup(TOKEN), lookup(DEFAULT_CA)) == (
        'ConfigMap "corp-ca" has no CA bundle under key "ca-bundle.crt"'
    )
    corp = {"metadata": {"name": "corp-ca"}, "data": {"ca-bundle.crt": PEM}}
    found = resolve(ISSUED, named, lookup(TOKEN), lookup(corp))
    assert isinstance(found, Credentials) and found.ca == b64(PEM)
    system = resolve(ISSUED, {}, lookup(TOKEN), lookup())
    assert isinstance(system, Credentials) and system.ca == ""


def test_caches_keep_only_what_a_config_is_rendered_from() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "s",
            "namespace": "ns",
            "resourceVersion": "7",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
            "managedFields": [{}],
        },
        "data": {"token": "dA==", "config.yaml": "eA==", "password": "c2VjcmV0"},
    }
    assert keep_credentials(secret) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": "s", "namespace": "ns", "resourceVersion": "7"},
        "data": {"token": "dA==", "config.yaml": kept_data("eA==")},
    }
    assert kept_data("eA==").startswith("blake2b:")  # compared, never read back
    configmap = {"metadata": {"name": "c"}, "data": {"ca.crt": PEM, "settings.json": "{}"}}
    assert keep_certificates(configmap)["data"] == {"ca.crt": PEM}
