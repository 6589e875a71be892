"""The secrets benchmark's baseline: our reconciler with the cluster-wide Secret watch.

Before Secrets were read by name, a cluster-wide reconciler listed and watched every
Secret in the cluster (keeping only the `token` and `config.yaml` keys of each). This
runs `virtualtarget reconcile` unchanged except that its Secret cache is that list and
watch again (and the access check lets it list and watch Secrets cluster-wide), so the
two differ in that one thing.

    python -m bench._secret_watch reconcile --kubeconfig K ...
"""

from __future__ import annotations

import sys
from unittest import mock

from pool.model.access import SECRETS, allowed
from reconciler.runtime import caches, kube

__all__ = ["main"]


def _allowed(resource: object, verb: str, sub: str = "", mode: str = "cluster") -> bool:
    if resource == SECRETS and verb in ("list", "watch"):
        return True
    return allowed(resource, verb, sub, mode)  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    from virtualtarget.cli import main as cli

    with (
        mock.patch.object(caches, "secrets_by_name", lambda _scope: False),
        mock.patch.object(kube, "allowed", _allowed),
    ):
        result: int = cli(argv)
        return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
