"""An instance Pod of a QEMU pool as the reconciler renders it, from a class's and a set's
parameters and scheduling: what the unit tests read and the loopback tests send to
kube-apiserver. The Exporter carries the name the apiserver would complete from its
generateName and a uid, as the real one does. No I/O.
"""

from __future__ import annotations

import base64
from typing import Any

from pool.model.keys import generate_name
from pool.rendering.provisioners.qemu import DEFAULT_IMAGES, QemuProvisioner
from pool.rendering.render import Credentials, instance_context, render_exporter
from tests.e2e.objects import exporter_set, virtual_target_class

__all__ = ["EXPORTER", "instance_pod"]

# The Exporter's name as kube-apiserver completes its generateName (5 characters).
EXPORTER = f"{generate_name('pool')}x7k2q"
_CREDENTIALS = Credentials("grpc.example.com:443", "t", base64.b64encode(b"PEM").decode())


def instance_pod(
    namespace: str,
    *,
    layout: str,
    parameters: dict[str, Any] | None = None,
    set_parameters: dict[str, Any] | None = None,
    scheduling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Pod of the set `pool`'s instance on the class `qemu` in `layout`."""
    klass = virtual_target_class(
        "qemu",
        namespace,
        parameters={"layout": layout, **(parameters or {})},
        **({"scheduling": scheduling} if scheduling else {}),
    )
    extra = {"parameters": set_parameters} if set_parameters is not None else {}
    pool = exporter_set("pool", namespace, class_name="qemu", with_template=True, **extra)
    exporter = render_exporter(pool, generate_name("pool"))
    exporter["metadata"] |= {"name": EXPORTER, "uid": "6c1e0000-0000-4000-8000-000000000001"}
    ctx = instance_context(pool, klass, exporter, DEFAULT_IMAGES, _CREDENTIALS)
    return QemuProvisioner().render_pod(ctx)
