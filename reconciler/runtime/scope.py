"""Where the reconciler watches pools: one namespace, a listed set of them, or the cluster.

The scope decides, in one place, what every other part follows: the caches list and
watch only its namespaces, writes outside it are refused before they are sent
(`reconciler.runtime.kube`), the leader Lease of a one-namespace install lives in that
namespace, and which of the access table's entries apply (`pool.model.access`):

- `cluster`: one ClusterRole. RBAC cannot restrict a list or watch by label, so it holds
  no `list` or `watch` on Secrets: the two kinds of Secret the reconciler needs (the
  config Secrets it writes, the credential Secrets Exporters name) are read by name and
  read again every `secret_resync` seconds (`reconciler.runtime.named`).
- `namespaced` (one namespace or a list): a Role per namespace; Secrets are watched there,
  and the pool's memory (cooldown, backoff) is a coordination Lease beside the set
  (`reconciler.runtime.memory`), as the Role of Jumpstarter's operator allows no write to
  an ExporterSet but its status.

`NAMESPACE` in the environment (as Jumpstarter's operator sets it) selects the
one-namespace mode when no namespace is given on the command line. No I/O.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from api.access import CLUSTER, NAMESPACED

__all__ = ["NAMESPACE_ENV", "Scope", "parse_namespaces"]

NAMESPACE_ENV = "NAMESPACE"
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Scope:
    """`namespaces` is None for the whole cluster, else the namespaces watched."""

    namespaces: tuple[str, ...] | None = None

    @property
    def mode(self) -> str:
        """The access table's column this scope grants (`api.access.CLUSTER`/`NAMESPACED`)."""
        return CLUSTER if self.namespaces is None else NAMESPACED

    @property
    def streams(self) -> tuple[str | None, ...]:
        """What each cache lists and watches: None (every namespace) or each namespace."""
        return (None,) if self.namespaces is None else self.namespaces

    def allows(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    def describe(self) -> str:
        if self.namespaces is None:
            return "every namespace"
        return f"namespace{'s' if len(self.namespaces) > 1 else ''} {', '.join(self.namespaces)}"

    @classmethod
    def from_args(
        cls, namespaces: Iterable[str] | None, environ: Mapping[str, str] = os.environ
    ) -> Scope:
        """The namespaces given (each may be a comma-separated list), else $NAMESPACE,
        else the whole cluster."""
        given = parse_namespaces(namespaces or ())
        if not given:
            given = parse_namespaces([environ.get(NAMESPACE_ENV, "")])
        return cls(given or None)


def parse_namespaces(values: Iterable[str]) -> tuple[str, ...]:
    """`["a,b", "c"]` -> `("a", "b", "c")`, each a namespace name, in order, once."""
    found: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            if len(name) > 63 or not _LABEL.match(name):
                raise ValueError(f"{name!r} is not a namespace name (an RFC 1123 label)")
            if name not in found:
                found.append(name)
    return tuple(found)
