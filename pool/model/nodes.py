"""When the node a Pod is on counts as lost, from the Node object alone. No I/O.

A node is lost while its Ready condition is not True:
- Unknown: the node lifecycle controller has heard nothing from its kubelet for its grace
  period (`--node-monitor-grace-period`, 50 s by default): a crash, a power cut, a
  partition. It taints the node `node.kubernetes.io/unreachable` at the same moment.
- False: the kubelet itself says the node cannot run Pods (its runtime or network is down).

Either way the exporters of its Pods are cut from Jumpstarter's controller, or soon will
be, and Kubernetes evicts those Pods only after their NoExecute toleration (300 s by
default) and never finishes deleting them while the kubelet is gone. The pools do not
wait for that (`pool.rules.buckets`, LOST). A Node without a Ready condition has not
reported yet, and no Pod runs there: it is not lost. A Node that is gone altogether is
(`GONE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["GONE", "node_lost"]

GONE = "the Node is gone"


def node_lost(node: Mapping[str, Any]) -> str:
    """What makes the node lost, "" when it is not: "Ready Unknown since <time>: <message>"."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") == "True":
        return ""
    said = f"Ready {ready.get('status', 'Unknown')}"
    if since := ready.get("lastTransitionTime"):
        said += f" since {since}"
    if message := str(ready.get("message") or ready.get("reason") or "").strip():
        said += f": {message}"
    return said
