"""A development stand-in for Jumpstarter's controller's credential step.

In a cluster, Jumpstarter's controller issues each Exporter's credentials: a Secret
holding the exporter's token under `token`, named in the Exporter's
`status.credential` and owned by the Exporter (so the garbage collector removes it with
its Exporter), and the controller's gRPC address in `status.endpoint`. It also
publishes its CA bundle in the ConfigMap `jumpstarter-service-ca-cert`. The loopback
control plane of `make run` and of the end-to-end tests has no Jumpstarter, so this
stand-in plays that step for the Exporters it sees, so that pools fill with config
Secrets and Pods. It is never deployed: it runs only inside `virtualtarget dev` and
the tests, and it says so in every line it logs.
"""

from __future__ import annotations

import base64
import logging
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.jumpstarter import DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY, TOKEN_KEY

__all__ = ["DEV_ENDPOINT", "CredentialStandIn"]

log = logging.getLogger("jumpstarter-standin")

# No Jumpstarter controller answers in development; `.invalid` can never resolve.
DEV_ENDPOINT = "jumpstarter-controller.invalid:443"
_GROUP, _VERSION, _PLURAL = "jumpstarter.dev", "v1alpha1", "exporters"


def token_secret_name(exporter: str) -> str:
    return f"{exporter}-exporter-token"


@dataclass
class CredentialStandIn:
    """Issues credentials to every Exporter that has none (and rotates them on request)."""

    api_client: Any  # kubernetes.client.ApiClient
    endpoint: str = DEV_ENDPOINT
    ca_pem: str = ""  # published as jumpstarter-service-ca-cert when given
    namespace: str | None = None  # all namespaces when None
    interval: float = 0.5
    issued: int = 0
    _published: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

    def _exporters(self) -> list[dict[str, Any]]:
        found: Any
        if self.namespace:
            found = self.custom.list_namespaced_custom_object(
                _GROUP, _VERSION, self.namespace, _PLURAL
            )
        else:
            found = self.custom.list_cluster_custom_object(_GROUP, _VERSION, _PLURAL)
        items: list[dict[str, Any]] = found.get("items", [])
        return items

    def _write_token(self, namespace: str, exporter: str, token: str, uid: str = "") -> str:
        """Create the token Secret (owned by the Exporter `uid` when given), or put the new
        token (and owner, when given) into the one there."""
        from kubernetes.client.exceptions import ApiException

        name = token_secret_name(exporter)
        data = {TOKEN_KEY: base64.b64encode(token.encode()).decode()}
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["ownerReferences"] = [
                {
                    "apiVersion": f"{_GROUP}/{_VERSION}",
                    "kind": "Exporter",
                    "name": exporter,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        body: Any = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": data}
        try:
            self.core.create_namespaced_secret(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            change: dict[str, Any] = {"data": data}
            if uid:
                change["metadata"] = {"ownerReferences": metadata["ownerReferences"]}
            self.core.patch_namespaced_secret(name, namespace, change)
        return name

    def _publish_ca(self, namespace: str) -> None:
        from kubernetes.client.exceptions import ApiException

        if not self.ca_pem or namespace in self._published:
            return
        body: Any = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": DEFAULT_CA_CONFIGMAP, "namespace": namespace},
            "data": {DEFAULT_CA_KEY: self.ca_pem},
        }
        try:
            self.core.create_namespaced_config_map(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        self._published.add(namespace)

    def issue(self, namespace: str, exporter: str, uid: str = "") -> str:
        """Write a fresh token Secret (owned by the Exporter `uid`) and point the Exporter's
        status at it; the token."""
        self._publish_ca(namespace)
        token = secrets.token_urlsafe(32)
        name = self._write_token(namespace, exporter, token, uid)
        status = {"status": {"credential": {"name": name}, "endpoint": self.endpoint}}
        self.custom.patch_namespaced_custom_object_status(
            _GROUP, _VERSION, namespace, _PLURAL, exporter, status
        )
        self.issued += 1
        log.info("dev stand-in for Jumpstarter: issued credentials to %s/%s", namespace, exporter)
        return token

    def rotate(self, namespace: str, exporter: str) -> str:
        """A new token in the same Secret, as a token rotation would; the new token."""
        token = secrets.token_urlsafe(32)
        self._write_token(namespace, exporter, token)
        log.info("dev stand-in for Jumpstarter: rotated the token of %s/%s", namespace, exporter)
        return token

    def issue_pending(self) -> int:
        """One sweep: credentials for every Exporter without them; how many were issued."""
        count = 0
        for exporter in self._exporters():
            meta, status = exporter.get("metadata", {}), exporter.get("status") or {}
            if meta.get("deletionTimestamp") or (status.get("credential") or {}).get("name"):
                continue
            self.issue(meta["namespace"], meta["name"], meta.get("uid", ""))
            count += 1
        return count

    def run(self, stop: threading.Event) -> None:
        """Sweep every `interval` until `stop`; errors are logged and the sweep retried."""
        log.info("dev stand-in for Jumpstarter's credential step: running (never deployed)")
        while not stop.is_set():
            try:
                self.issue_pending()
            except Exception as exc:  # a development aid: keep going, say what happened
                log.warning("dev stand-in for Jumpstarter: %s", exc)
            stop.wait(self.interval)
