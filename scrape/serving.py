"""What the webhook and the reconciler print once each of their servers listens. With
port 0 that line is the only place that names the port the kernel chose, and the test
harness reads it there (`harness.stack.served_url`)."""

from __future__ import annotations

__all__ = ["SERVING_METRICS", "SERVING_PROBES", "SERVING_WEBHOOK"]

SERVING_PROBES = "serving /healthz and /readyz on port %d"  # the reconciler's log
SERVING_METRICS = "serving /metrics on port %d"  # the reconciler's log
SERVING_WEBHOOK = "virtualtarget webhook: serving https://%s:%d (%s)"  # host, port, mode
