"""What kube-apiserver itself says about the requests it served: `apiserver_request_total`
from its /metrics, and its audit log told apart by user, for the benchmarks and the tests
that count requests from the server's side rather than from a client's own counters.
"""

from __future__ import annotations

import re
import ssl
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from harness.controlplane import ControlPlane

__all__ = [
    "READ_VERBS",
    "WRITE_VERBS",
    "agent",
    "audit_requests",
    "request_totals",
    "resource_of",
    "username",
]

READ_VERBS = frozenset({"get", "list", "watch"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def request_totals(plane: ControlPlane) -> Counter[tuple[str, str]]:
    """`apiserver_request_total` summed by (verb, plural[.group][/subresource]), as the admin
    reads the apiserver's /metrics (verbs as it counts them: GET, LIST, WATCH, POST...)."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    context.check_hostname = False  # its self-signed certificate names the host, not 127.0.0.1
    request = urllib.request.Request(
        f"{plane.server}/metrics", headers={"Authorization": f"Bearer {plane.token}"}
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        text = response.read().decode()
    totals: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None:
            continue
        labels = dict(_LABEL.findall(found["labels"]))
        resource = labels.get("resource", "")
        if labels.get("group"):
            resource += "." + labels["group"]
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        totals[labels.get("verb", ""), resource] += int(float(found["value"]))
    return totals


def resource_of(event: dict[str, Any]) -> str:
    """`plural[.group][/subresource]` of an audit event, as `request_totals` keys them."""
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource", ""))
    if ref.get("apiGroup"):
        resource += f".{ref['apiGroup']}"
    return f"{resource}/{ref['subresource']}" if ref.get("subresource") else resource


Window = tuple[datetime, datetime]


def username(event: dict[str, Any]) -> str:
    """Who made an audited request: the user it authenticated as."""
    return str((event.get("user") or {}).get("username", ""))


def agent(event: dict[str, Any]) -> str:
    """The program that made an audited request: its User-Agent's product, which client-go
    names after the binary (`DefaultKubernetesUserAgent`: `<os.Args[0]'s base>/<version>`)."""
    return str(event.get("userAgent", "")).partition("/")[0]


def audit_requests(
    events: Iterable[dict[str, Any]],
    windows: Mapping[str, Window],
    who: Callable[[dict[str, Any]], str] = username,
) -> dict[str, Counter[tuple[str, str, str]]]:
    """For each named window [start, end), the requests received in it by (who, verb,
    resource), from audit events of a policy that logs each request once, when it ends;
    `who` is the user unless another reading is given (`agent`)."""
    counts: dict[str, Counter[tuple[str, str, str]]] = {name: Counter() for name in windows}
    for event in events:
        received = datetime.fromisoformat(event["requestReceivedTimestamp"])
        key: tuple[str, str, str] | None = None
        for name, (start, end) in windows.items():
            if start <= received < end:
                if key is None:
                    key = (who(event), str(event.get("verb", "")), resource_of(event))
                counts[name][key] += 1
    return counts
