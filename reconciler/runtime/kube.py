"""A small JSON client for the Kubernetes API over the official `kubernetes` ApiClient.

Objects stay plain dicts end to end (the planner's adapter reads dicts), custom and
built-in resources go through one code path, and every call is checked against
`pool.model.access.ACCESS` (and the provisioner's `provisioned`) before it is sent, so an
undeclared call fails in tests rather than in a cluster with generated RBAC.

Writes are counted by verb and resource (a metric), and each one is preceded by the
`may_write` check, if one is set: leader election sets it, so a leader that has not
renewed its Lease in time (a process that was paused, say) sends no write at all, as
late as the moment before the request leaves. A write into a namespace outside
`write_namespaces` (the scope and the leader Lease's namespace, when the scope is not
the whole cluster) is refused the same way, so the writes follow the scope.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

import yaml
from kubernetes.client import ApiClient
from kubernetes.watch.watch import iter_resp_lines

from api.access import CLUSTER, Permission
from pool.model.access import Resource, allowed

__all__ = ["ApiError", "ConfigError", "Kube", "NotLeading", "WatchExpired", "api_client"]

Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer: `status` is the HTTP code, `reason` the Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message


class WatchExpired(Exception):
    """The watch's resource version is too old (410 Gone): list again."""


class NotLeading(Exception):
    """A write refused before it was sent: this process no longer knows itself the leader."""


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class ConfigError(Exception):
    """The cluster configuration cannot be loaded; the message says why, on one line."""


def api_client(kubeconfig: str | None) -> ApiClient:
    """A client from a kubeconfig (a file, or files joined with the path separator as in
    $KUBECONFIG), or from the in-cluster configuration when none is given."""
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    try:
        if not kubeconfig:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return ApiClient()
        if not any(os.path.isfile(path) for path in kubeconfig.split(os.pathsep)):
            raise ConfigError(f"kubeconfig {kubeconfig}: no such file")
        client: ApiClient = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        return client
    except ConfigException as exc:
        raise ConfigError(f"cannot load the cluster configuration: {exc}") from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())  # the parser's message spans several lines
        raise ConfigError(f"kubeconfig {kubeconfig}: not valid YAML: {detail}") from None
    except (TypeError, AttributeError) as exc:  # the loader indexes whatever YAML it got
        raise ConfigError(f"kubeconfig {kubeconfig}: not a kubeconfig ({exc})") from None


class Kube:
    def __init__(
        self, api_client: ApiClient, request_timeout: float = 30.0, mode: str = CLUSTER
    ) -> None:
        self.api = api_client
        self.timeout = request_timeout
        self.mode = mode  # the install scope whose access-table entries apply
        # the calls on the provisioner's own resources (`pool.model.access.provisioned_access`)
        self.provisioned: tuple[Permission, ...] = ()
        self.may_write: Callable[[], bool] | None = None
        self.write_namespaces: frozenset[str] | None = None  # None: any namespace
        # (verb, resource plural with its subresource) -> writes sent
        self.writes: dict[tuple[str, str], int] = {}
        self._writes_lock = threading.Lock()

    def _count(self, method: str, resource: Resource, sub: str, namespace: str) -> None:
        if self.may_write is not None and not self.may_write():
            raise NotLeading(f"{_VERBS[method]} {resource.plural}: not the leader any more")
        if self.write_namespaces is not None and namespace not in self.write_namespaces:
            raise PermissionError(
                f"{_VERBS[method]} {resource.plural} in namespace {namespace!r}: outside the scope"
            )
        key = (_VERBS[method], f"{resource.plural}/{sub}" if sub else resource.plural)
        with self._writes_lock:
            self.writes[key] = self.writes.get(key, 0) + 1

    def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: float | None = None,
    ) -> Any:
        if query:
            path += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, headers, body, post = self.api.param_serialize(
            method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self.api.call_api(
            method, url, headers, body, post, _request_timeout=timeout or self.timeout
        )
        if stream and 200 <= response.status < 300:
            return response.response
        data = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status < 300:
            status = _status_body(data)
            raise ApiError(response.status, status.get("reason", ""), status.get("message", ""))
        return json.loads(data) if data else {}

    def _check(self, resource: Resource, verb: str, sub: str = "") -> None:
        if not allowed(resource, verb, sub, self.mode, self.provisioned):
            raise PermissionError(
                f"{verb} {resource.plural}{'/' + sub if sub else ''} is not in ACCESS"
                f" for a {self.mode} install"
            )

    def list(
        self, resource: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[Obj], str]:
        self._check(resource, "list")
        result = self._call(
            "GET", resource.path(namespace), {"labelSelector": label_selector}, timeout=120
        )
        kind = resource.kind
        items = [{"apiVersion": resource.api_version, "kind": kind, **i} for i in result["items"]]
        return items, result["metadata"].get("resourceVersion", "")

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 240,
    ) -> Iterator[tuple[str, Obj]]:
        """Events after `resource_version` (bookmarks included); WatchExpired on 410."""
        self._check(resource, "watch")
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            "labelSelector": label_selector,
        }
        try:
            raw = self._call(
                "GET", resource.path(namespace), query, stream=True, timeout=timeout_seconds + 30
            )
        except ApiError as exc:
            if exc.status == 410:
                raise WatchExpired(str(exc)) from exc
            raise
        try:
            for line in iter_resp_lines(raw):  # type: ignore[no-untyped-call]
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        raise WatchExpired(obj.get("message", "resource version too old"))
                    raise ApiError(
                        obj.get("code", 500), obj.get("reason", ""), obj.get("message", "")
                    )
                yield event["type"], obj
        finally:
            raw.release_conn()

    def get(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        """The object, or None when it does not exist."""
        self._check(resource, "get")
        try:
            result: Obj = self._call("GET", resource.path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def create(self, resource: Resource, namespace: str, body: Obj) -> Obj:
        self._check(resource, "create")
        self._count("POST", resource, "", namespace)
        result: Obj = self._call("POST", resource.path(namespace), body=body)
        return result

    def review(self, resource: Resource, body: Obj) -> Obj:
        """Create a cluster-scoped review (TokenReview, SubjectAccessReview): a question to
        the apiserver, not a write, so neither counted nor held back by leadership."""
        self._check(resource, "create")
        result: Obj = self._call("POST", resource.path(), body=body, timeout=5)
        return result

    def patch(
        self, resource: Resource, namespace: str, name: str, patch: Obj, sub: str = ""
    ) -> Obj:
        """A JSON merge patch; include metadata.resourceVersion to make it conditional."""
        self._check(resource, "patch", sub)
        self._count("PATCH", resource, sub, namespace)
        result: Obj = self._call(
            "PATCH",
            resource.path(namespace, name, sub),
            body=patch,
            content_type="application/merge-patch+json",
        )
        return result

    def update(self, resource: Resource, namespace: str, name: str, body: Obj) -> Obj:
        self._check(resource, "update")
        self._count("PUT", resource, "", namespace)
        result: Obj = self._call("PUT", resource.path(namespace, name), body=body)
        return result

    def delete(self, resource: Resource, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete (only the object with `uid` when given); False when it was already gone."""
        self._check(resource, "delete")
        self._count("DELETE", resource, "", namespace)
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._call("DELETE", resource.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _status_body(data: bytes) -> dict[str, Any]:
    """The Status object of an error answer; a resource that is not served answers with
    plain text ("404 page not found"), which becomes the message."""
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return {"message": data.decode(errors="replace").strip()}
