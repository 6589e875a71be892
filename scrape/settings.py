"""Metrics of the administrator's settings a component started with, the same for the
webhook and the reconciler: an alert can then name a replica that runs without them
(deploy/components/monitoring, `VirtualTargetNoImageAllowList`)."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

__all__ = ["IMAGE_ALLOW_LIST_METRIC", "image_allow_list_gauge"]

IMAGE_ALLOW_LIST_METRIC = "virtualtarget_image_allow_list_enabled"


def image_allow_list_gauge(enabled: bool) -> GaugeMetricFamily:
    """1 when the process checks images against an allow-list (`--allowed-image-prefixes`
    or `--require-image-digest`), 0 when it lets every image pass."""
    return GaugeMetricFamily(
        IMAGE_ALLOW_LIST_METRIC,
        "1 if an image allow-list is configured; 0: every image passes.",
        value=1 if enabled else 0,
    )
