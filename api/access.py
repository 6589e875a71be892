"""The Kubernetes API access a component needs, declared once next to its code.

The webhook and the reconciler each keep one table, `ACCESS: tuple[Permission, ...]`
(`webhook/access.py`, `pool/model/access.py`), listing every API call they make. The
ClusterRoles under `deploy/base/rbac/` are generated from those tables, and a test
checks that the committed files equal the generated ones, so RBAC grants exactly what
the code uses: there is no second, hand-maintained list.

Pure data: no I/O, importable from anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CLUSTER", "MODES", "NAMESPACED", "SCRAPE_REVIEWS", "VERBS", "Permission", "merge"]

# The verbs RBAC knows for resource requests; anything else is a typo.
VERBS = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

# The install scopes a component can run in: one ClusterRole for the whole cluster, or a
# Role in each namespace it serves (`reconciler.runtime.scope`).
CLUSTER = "cluster"
NAMESPACED = "namespaced"
MODES = (CLUSTER, NAMESPACED)


@dataclass(frozen=True)
class Permission:
    """One RBAC rule: `verbs` on `resource` in `api_group`.

    `api_group` is "" for the core group (pods, events). `resource` is the plural name,
    with a subresource after a slash (`exportersets/status`). `own_namespace` marks calls
    confined to the component's own namespace (leader-election Leases): they are granted
    by a Role there instead of cluster-wide. `cluster_scoped` marks cluster-scoped
    resources (reviews), granted by a ClusterRole in every mode. `modes` names the install
    scopes whose code makes the call (`CLUSTER`, `NAMESPACED`).
    """

    api_group: str
    resource: str
    verbs: tuple[str, ...]
    own_namespace: bool = False
    cluster_scoped: bool = False
    modes: tuple[str, ...] = MODES

    def __post_init__(self) -> None:
        unknown = sorted(set(self.verbs) - VERBS)
        if unknown or not self.verbs:
            raise ValueError(f"{self.api_group}/{self.resource}: bad verbs {unknown or '(none)'}")
        if not self.resource or self.resource != self.resource.lower():
            raise ValueError(f"resource must be a lower-case plural name, got {self.resource!r}")
        if not self.modes or set(self.modes) - set(MODES):
            raise ValueError(f"{self.api_group}/{self.resource}: bad modes {self.modes}")

    def applies(self, mode: str) -> bool:
        return mode in self.modes


def merge(permissions: Iterable[Permission]) -> tuple[Permission, ...]:
    """One entry per (group, resource) with the union of verbs, in a stable order."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for p in permissions:
        verbs.setdefault((p.api_group, p.resource), set()).update(p.verbs)
    return tuple(
        Permission(group, resource, tuple(sorted(v)))
        for (group, resource), v in sorted(verbs.items())
    )


# What a component serving `/metrics` to authorized callers only needs (scrape.auth): to
# ask the apiserver who a bearer token belongs to, and whether that user may get /metrics.
SCRAPE_REVIEWS: tuple[Permission, ...] = (
    Permission("authentication.k8s.io", "tokenreviews", ("create",), cluster_scoped=True),
    Permission("authorization.k8s.io", "subjectaccessreviews", ("create",), cluster_scoped=True),
)
