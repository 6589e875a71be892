"""Every Kubernetes API call the webhook makes, declared once.

The cache (`webhook.cache`) lists and watches exactly the resources named here and
reads them live on a miss; the deploy RBAC is generated from this table.
"""

from __future__ import annotations

from api.access import SCRAPE_REVIEWS, Permission
from webhook.routes import KINDS, Kind

__all__ = ["ACCESS", "CACHED_KINDS", "INSTANCE_KINDS"]

# The kinds the cross-object checks look up, in the order their caches start.
CACHED_KINDS = (KINDS["VirtualTargetClass"], KINDS["ExporterSet"])
# Read live when a set is deleted, to name its leased instances: its Exporters and
# Jumpstarter's Leases.
INSTANCE_KINDS = (KINDS["Exporter"], Kind("Lease", "jumpstarter.dev", "v1alpha1", "leases"))

ACCESS: tuple[Permission, ...] = (
    *(Permission(kind.group, kind.plural, ("get", "list", "watch")) for kind in CACHED_KINDS),
    *(Permission(kind.group, kind.plural, ("list",)) for kind in INSTANCE_KINDS),
    # `/metrics` only for callers the apiserver authenticates and authorizes (scrape.auth)
    *SCRAPE_REVIEWS,
)
