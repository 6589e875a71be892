"""A development stand-in for Jumpstarter's controller's credential step.

In a cluster, Jumpstarter's controller issues each Exporter's credentials: a Secret
holding the exporter's token under `token`, named in the Exporter's
`status.credential` and owned by the Exporter (so the garbage collector removes it with
its Exporter), and the controller's gRPC address in `status.endpoint`. It also
publishes its CA bundle in the ConfigMap `jumpstarter-service-ca-cert`. The loopback
control plane of `make run` and of the end-to-end tests has no Jumpstarter, so this
stand-in plays that step for the Exporters it sees, so that pools fill with config
Secrets and Pods. It is never deployed: it runs only inside `make run` (`harness.dev`) and
the tests, and it says so in every line it logs.

It watches Exporters (a list, then a watch, as the reconciler's caches do) and issues
from a few threads as their events arrive, so the dev stack and the benchmarks on it
measure the product, not a stand-in that lists every Exporter twice a second.
"""

from __future__ import annotations

import base64
import logging
import queue
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from pool.model.access import EXPORTERS
from pool.model.jumpstarter import DEFAULT_CA_CONFIGMAP, DEFAULT_CA_KEY, TOKEN_KEY
from reconciler.runtime.cache import Informer, ObjKey, keep_only, key_of
from reconciler.runtime.kube import Kube

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
    workers: int = 4  # issuing threads (two writes per Exporter)
    retry_delay: float = 1.0  # after a failed issue, while the Exporter still needs one
    issued: int = 0
    _published: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Exporters (uids) queued or issued to, so a later event of one is not issued twice.
    _handled: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

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

    def _needs_credentials(self, exporter: dict[str, Any]) -> bool:
        meta, status = exporter.get("metadata") or {}, exporter.get("status") or {}
        return not meta.get("deletionTimestamp") and not (status.get("credential") or {}).get(
            "name"
        )

    def _on_exporter(
        self, pending: queue.Queue[ObjKey], kind: str, exporter: dict[str, Any]
    ) -> None:
        uid = (exporter.get("metadata") or {}).get("uid", "")
        with self._lock:
            if kind == "DELETED" or not self._needs_credentials(exporter):
                self._handled.discard(uid)  # gone, or issued: a later loss is issued again
                return
            if uid in self._handled:
                return
            self._handled.add(uid)
        pending.put(key_of(exporter))

    def _issuer(
        self, informer: Informer, pending: queue.Queue[ObjKey], stop: threading.Event
    ) -> None:
        while not stop.is_set():
            try:
                namespace, name = pending.get(timeout=0.2)
            except queue.Empty:
                continue
            exporter = informer.get(namespace, name)
            if exporter is None or not self._needs_credentials(exporter):
                continue
            uid = (exporter.get("metadata") or {}).get("uid", "")
            try:
                self.issue(namespace, name, uid)
            except Exception as exc:  # a development aid: keep going, say what happened
                log.warning("dev stand-in for Jumpstarter: %s/%s: %s", namespace, name, exc)
                stop.wait(self.retry_delay)
                pending.put((namespace, name))  # still without credentials? tried again

    def run(self, stop: threading.Event) -> None:
        """Watch Exporters and issue credentials to each new one until `stop`; a failed
        issue is tried again while the Exporter still has none. Returns soon after `stop`;
        the watch itself ends with its next event or its timeout."""
        log.info("dev stand-in for Jumpstarter's credential step: running (never deployed)")
        pending: queue.Queue[ObjKey] = queue.Queue()
        informer = Informer(
            Kube(self.api_client),
            EXPORTERS,
            self.namespace,
            transform=keep_only("status.credential"),
        )
        informer.add_handler(lambda kind, new, _old: self._on_exporter(pending, kind, new))
        threads = [
            threading.Thread(target=self._issuer, args=(informer, pending, stop), daemon=True)
            for _ in range(self.workers)
        ]
        for thread in threads:
            thread.start()
        threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
        for thread in threads:
            thread.join()
