"""What a set's pool will be, worked out with the reconciler's own pure code: the objects
an instance gets, which other sets a Lease for it may also match, which of its instances
serve a lease. The webhook's one way into `reconciler` (`.importlinter`): only modules
that do no I/O, so the webhook renders exactly what the reconciler would write.

Sizes are the apiserver's limits (k8s.io/kubernetes validation and the generic server):
a Secret holds at most 1 MiB of data, annotations at most 256 KiB, and no request body may
exceed 3 MiB. An instance is rendered as its config Secret and Pod would be once
Jumpstarter's controller has issued its credentials: the class merged, the generated name
at its full length, and placeholders for what only that controller knows (a token of
`PLACEHOLDER_TOKEN` bytes, a CA bundle of `PLACEHOLDER_CA` bytes).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.fielderrors import FieldError
from api.quantity import parse_quantity
from pool.model.adapt import exporter_view, lease_view
from pool.model.jumpstarter import CONFIG_KEY
from pool.model.keys import SET_LABEL, generate_name
from pool.model.views import PoolClaim
from pool.rendering.provisioners import known
from pool.rendering.render import (
    Credentials,
    config_secret,
    config_text,
    export_map,
    exporter_config,
    instance_context,
    render_exporter,
)
from pool.rules.buckets import is_busy
from pool.rules.claims import overlap
from pool.rules.protection import busy_lease, leased_names
from webhook.jsontext import compact_json

__all__ = [
    "ANNOTATIONS_LIMIT",
    "PLACEHOLDER_CA",
    "PLACEHOLDER_TOKEN",
    "REQUEST_LIMIT",
    "SECRET_DATA_LIMIT",
    "SET_LABEL",
    "Rendered",
    "leased_instances",
    "overlapping",
    "render_instance",
    "storable_errors",
]

SECRET_DATA_LIMIT = 1024 * 1024  # a Secret's data, all keys together
REQUEST_LIMIT = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes
ANNOTATIONS_LIMIT = 256 * 1024  # an object's annotations, keys and values together
PLACEHOLDER_TOKEN = 1024
PLACEHOLDER_CA = 4096
_SHOWN = 3  # driver configs named in a message

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Rendered:
    """One instance of a set, as the reconciler would write it."""

    exporter: dict[str, Any]
    secret: dict[str, Any]
    pod: dict[str, Any]
    config: str  # config.yaml
    drivers: list[dict[str, Any]]  # the export tree's drivers, as the provisioner runs them


def render_instance(exporter_set: Obj, klass: Obj) -> Rendered | None:
    """An instance of the set rendered with its class, None when the class names a
    provisioner this product does not render."""
    provisioner = known(_map(klass.get("spec")).get("provisioner"))
    if provisioner is None:
        return None
    meta = _map(exporter_set.get("metadata"))
    name = str(meta.get("name") or meta.get("generateName") or "set")
    exporter = render_exporter(exporter_set, generate_name(name))
    exporter["metadata"]["name"] = generate_name(name) + "x" * 5  # as the apiserver completes
    exporter["metadata"]["uid"] = "0" * 36
    credentials = Credentials(
        "jumpstarter-grpc.jumpstarter-lab.svc.cluster.local:443",
        "t" * PLACEHOLDER_TOKEN,
        "c" * PLACEHOLDER_CA,
    )
    ctx = instance_context(exporter_set, klass, exporter, provisioner.default_images, credentials)
    drivers = provisioner.drivers(ctx)
    secret = config_secret(ctx, exporter_config(ctx, drivers))
    text = base64.b64decode(secret["data"][CONFIG_KEY]).decode()
    return Rendered(exporter, secret, provisioner.render_pod(ctx), text, drivers)


def _request_bytes(obj: Obj) -> int:
    """The body the reconciler sends (the Kubernetes client's json.dumps)."""
    return len(json.dumps(obj).encode())


def _annotation_bytes(obj: Obj) -> int:
    annotations = _map(_map(obj.get("metadata")).get("annotations"))
    return sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())


def _largest_drivers(exporter_set: Obj, rendered: Rendered) -> str:
    """The template's drivers whose rendered configs are largest, in the config's bytes."""
    template = _map(_map(exporter_set.get("spec")).get("template"))
    listed = _map(template.get("spec")).get("drivers")
    index = {
        str(d.get("name")): i
        for i, d in enumerate(listed if isinstance(listed, list) else [])
        if isinstance(d, Mapping)
    }
    sizes = sorted(
        (
            (len(config_text({"export": export_map([driver])}).encode()), str(driver.get("name")))
            for driver in rendered.drivers
            if str(driver.get("name")) in index
        ),
        reverse=True,
    )
    return ", ".join(
        f'drivers[{index[name]}] "{name}" {size} bytes' for size, name in sizes[:_SHOWN]
    )


def storable_errors(exporter_set: Obj, klass: Obj, who: str = "") -> list[FieldError]:
    """What the apiserver would refuse to store of an instance of the set with this class,
    in the set's fields (`who`: the set's name, for a message about a class change).

    Rendering costs about a millisecond for a set of a few drivers (PyYAML's representer),
    and a pool's set is admitted again and again unchanged: the findings are remembered
    per set (name, namespace, spec) and class version (a class read from the cluster;
    one being admitted, by its spec)."""
    meta, class_meta = _map(exporter_set.get("metadata")), _map(klass.get("metadata"))
    version = class_meta.get("uid"), class_meta.get("resourceVersion")
    of_class = version if all(version) and not who else klass.get("spec")
    try:
        spec = exporter_set.get("spec")
        key = compact_json([meta.get("name"), meta.get("namespace"), spec, of_class, who])
    except (TypeError, ValueError):  # values JSON cannot spell
        return _storable_errors(exporter_set, klass, who)
    found = _CHECKED.get(key)
    if found is None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        found = _CHECKED[key] = tuple(_storable_errors(exporter_set, klass, who))
    return list(found)


_CHECKED: dict[str, tuple[FieldError, ...]] = {}
_CHECKED_MAX = 1024


def _storable_errors(exporter_set: Obj, klass: Obj, who: str) -> list[FieldError]:
    try:
        rendered = render_instance(exporter_set, klass)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return []  # parameters the provisioner's model refuses: reported as such already
    if rendered is None:
        return []
    errors: list[FieldError] = []
    subject = f'ExporterSet "{who}": an instance' if who else "an instance"
    config = len(rendered.config.encode())
    secret = _request_bytes(rendered.secret)
    if config > SECRET_DATA_LIMIT or secret > REQUEST_LIMIT:
        detail = (
            f"{subject} would get a {CONFIG_KEY} of {config} bytes, more than a Secret holds "
            f"({SECRET_DATA_LIMIT} bytes)"
        )
        if secret > REQUEST_LIMIT:
            detail += (
                f", sent as a request of {secret} bytes, more than the apiserver accepts "
                f"({REQUEST_LIMIT} bytes)"
            )
        largest = _largest_drivers(exporter_set, rendered)
        errors.append(
            FieldError.too_long(
                "spec.template.spec.drivers",
                f"{detail}; largest driver configs: {largest}" if largest else detail,
            )
        )
    errors += _request_above_limit(rendered.pod, subject)
    for kind, obj in (("Exporter", rendered.exporter), ("Pod", rendered.pod)):
        annotations = _annotation_bytes(obj)
        if annotations > ANNOTATIONS_LIMIT:
            errors.append(
                FieldError.too_long(
                    "spec.template.metadata.annotations",
                    f"{subject}'s {kind} would carry {annotations} bytes of annotations, more "
                    f"than the apiserver stores ({ANNOTATIONS_LIMIT} bytes)",
                )
            )
            break
        size = _request_bytes(obj)
        if size > REQUEST_LIMIT:
            errors.append(
                FieldError.too_long(
                    "spec.template",
                    f"{subject}'s {kind} would be a request of {size} bytes, more than the "
                    f"apiserver accepts ({REQUEST_LIMIT} bytes)",
                )
            )
    return errors


def _request_above_limit(pod: Obj, subject: str) -> list[FieldError]:
    """A request above its limit, which the apiserver refuses in any Pod. The class's own
    are checked when it is admitted; rendering adds one limit, the guest's disk's
    `ephemeral-storage` (size and fsOverhead), where the class names none: a class that
    requests more must say its own limit, or the pool a larger disk."""
    spec = _map(pod.get("spec"))
    errors = []
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        resources = _map(_map(container).get("resources"))
        requests, limits = _map(resources.get("requests")), _map(resources.get("limits"))
        for name in sorted(set(requests) & set(limits)):
            if parse_quantity(requests[name]) > parse_quantity(limits[name]):
                detail = (
                    f'{subject}\'s container "{container.get("name")}" would request '
                    f"{requests[name]} of {name}, above its limit {limits[name]} (the guest's "
                    "disk, size and fsOverhead, where the class's scheduling.resources name no "
                    "limit)"
                )
                errors.append(FieldError.invalid("spec.parameters.storage", requests[name], detail))
    return errors


def overlapping(me: PoolClaim, others: Iterable[PoolClaim]) -> list[tuple[str, str]]:
    """The other sets whose instances a Lease for this one may match (`others`: the sets
    of its namespace not being deleted, or those of them an index found may overlap), each
    with the set that counts such a Lease (`pool.rules.claims`: the older one)."""
    found = []
    for claim in others:
        if claim.name == me.name or not overlap(me, claim):
            continue
        # A set being created may not carry its creationTimestamp yet: it is the newest.
        older = claim if me.created is None or claim.seniority < me.seniority else me
        found.append((claim.name, older.name))
    return sorted(found)


def leased_instances(
    exporter_set: Obj, exporters: Sequence[Obj], leases: Sequence[Obj]
) -> list[tuple[str, str]]:
    """(instance, what keeps it: "lease NAME" or "a lease hook") of the set's busy
    instances, by name, as the reconciler would count them."""
    uid = _map(exporter_set.get("metadata")).get("uid")
    leased_by = leased_names(lease_view(lease) for lease in leases)
    found = []
    for exporter in exporters:
        refs = _map(exporter.get("metadata")).get("ownerReferences") or []
        if uid and not any(isinstance(r, Mapping) and r.get("uid") == uid for r in refs):
            continue
        view = exporter_view(exporter)
        if is_busy(view, leased_by):
            found.append((view.name, busy_lease(view, leased_by)))
    return sorted(found)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
