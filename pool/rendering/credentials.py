"""Whether an instance can be rendered yet: the credentials Jumpstarter's controller issued
for its Exporter, and the CA bundle its config trusts.

Jumpstarter's controller, not this reconciler, issues an exporter's credentials: it sets
the Exporter's `status.credential.name` (a Secret whose `token` key holds the token) and
`status.endpoint` (its gRPC address). The CA bundle is the class's
`caBundleConfigMapRef` (key defaulting to the schema's `ca-bundle.crt`); without one, the
`jumpstarter-service-ca-cert` ConfigMap a Jumpstarter install publishes, key `ca.crt`,
and when that is absent too, the system's roots (an empty `tls.ca`). A reference the
class makes explicitly must resolve, or the instance waits.

Pure over two lookups, `(namespace, name) -> object or None` (the runtime's caches), and
the cache transforms that keep only what this module reads. No I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any

from pool.model.defaults import field_default
from pool.model.jumpstarter import CONFIG_KEY, DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY, TOKEN_KEY
from pool.rendering.configsync import kept_data
from pool.rendering.render import Credentials

__all__ = [
    "NOT_ISSUED",
    "Lookup",
    "ca_source",
    "credential_secret_name",
    "keep_certificates",
    "keep_credentials",
    "resolve",
]

Obj = dict[str, Any]
Lookup = Callable[[str, str], Obj | None]

NOT_ISSUED = "no status.credential and status.endpoint yet"
_PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
_KEPT_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "ownerReferences",
    "deletionTimestamp",
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def credential_secret_name(exporter: Mapping[str, Any]) -> str:
    """The Secret an Exporter's status names for its token, "" while none is issued."""
    name = _map(_map(exporter.get("status")).get("credential")).get("name")
    return name if isinstance(name, str) else ""


def ca_source(klass: Mapping[str, Any]) -> tuple[str, str, bool]:
    """(ConfigMap name, key, named by the class) of the CA bundle a class's instances trust."""
    ref = _map(_map(klass.get("spec")).get("caBundleConfigMapRef"))
    name = ref.get("name")
    if isinstance(name, str) and name:
        key = ref.get("key") or field_default("VirtualTargetClass", "spec.caBundleConfigMapRef.key")
        return name, str(key), True
    return DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY, False


def resolve(
    exporter: Mapping[str, Any], klass: Mapping[str, Any], secrets: Lookup, configmaps: Lookup
) -> Credentials | str:
    """The instance's credentials, or why it must wait for them."""
    namespace = str(_map(exporter.get("metadata")).get("namespace", ""))
    secret_name = credential_secret_name(exporter)
    endpoint = _map(exporter.get("status")).get("endpoint")
    if not secret_name or not isinstance(endpoint, str) or not endpoint:
        return NOT_ISSUED
    secret = secrets(namespace, secret_name)
    if secret is None:
        return f'Secret "{secret_name}" not found'
    token = _decoded(_map(secret.get("data")).get(TOKEN_KEY))
    if not token:
        return f'Secret "{secret_name}" has no key "{TOKEN_KEY}"'
    name, key, explicit = ca_source(klass)
    configmap = configmaps(namespace, name)
    bundle = _map(configmap.get("data")).get(key) if configmap is not None else None
    if not isinstance(bundle, str) or not bundle:
        if explicit:
            return f'ConfigMap "{name}" has no CA bundle under key "{key}"'
        bundle = ""
    ca = base64.b64encode(bundle.encode()).decode() if bundle else ""
    return Credentials(endpoint, token, ca)


def _decoded(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64decode(value, validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def _slim_metadata(obj: Obj) -> Obj:
    meta = _map(obj.get("metadata"))
    kept: Obj = {k: obj[k] for k in ("apiVersion", "kind", "type") if k in obj}
    kept["metadata"] = {k: meta[k] for k in _KEPT_METADATA if k in meta}
    return kept


def keep_credentials(secret: Obj) -> Obj:
    """What the Secret cache keeps of any Secret: a little metadata and the two keys this
    reconciler reads, `token` and `config.yaml`, the latter only by its digest
    (`pool.rendering.configsync.kept_data`: it is only ever compared); the rest of a cluster's
    Secrets is never held."""
    kept = _slim_metadata(secret)
    data = _map(secret.get("data"))
    kept["data"] = {TOKEN_KEY: data[TOKEN_KEY]} if TOKEN_KEY in data else {}
    if isinstance(data.get(CONFIG_KEY), str):
        kept["data"][CONFIG_KEY] = kept_data(data[CONFIG_KEY])
    return kept


def keep_certificates(configmap: Obj) -> Obj:
    """What the ConfigMap cache keeps: a little metadata and PEM certificate values only."""
    kept = _slim_metadata(configmap)
    data = _map(configmap.get("data"))
    kept["data"] = {k: v for k, v in data.items() if isinstance(v, str) and _PEM_CERTIFICATE in v}
    return kept
