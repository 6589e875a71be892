"""The reconciler under an image allow-list: the set's `ImagesAllowed` condition, a pool
whose image the list refuses is kept but never grows, and a new instance is rendered only
from allowed images (`pool.rendering.imagecheck`, the planner's hold)."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api.imagepolicy import ImagePolicy
from pool.model.actions import CreateExporter, CreatePod, Remove
from pool.model.views import Observation, PodView
from pool.rendering.imagecheck import images_condition
from pool.rendering.provisioners.qemu import DEFAULT_IMAGES, QemuProvisioner
from pool.rendering.render import Credentials, instance_context, render_exporter
from pool.rules.planner import Plan, plan
from tests.unit.test_reconciler_support import T0, booting, klass, pool, ready
from tests.unit.test_webhook_support import a_class, a_set

POLICY = ImagePolicy.from_settings(["quay.io/jumpstarter-dev/"])
assert POLICY is not None
OTHER = "registry.example.com/lab/qemu-runtime:1"
ALLOWED = "quay.io/jumpstarter-dev/virtual/qemu-runtime:0.9.1"


def images(**roles: str) -> dict[str, Any]:
    return {role: {"image": image} for role, image in roles.items()}


def condition(exporter_set: dict[str, Any], vtc: dict[str, Any] | None) -> Any:
    return images_condition(POLICY, exporter_set, vtc, DEFAULT_IMAGES)


def status_condition(result: Plan, kind: str) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = result.status["conditions"]  # type: ignore[assignment]
    return next(c for c in conditions if c["type"] == kind)


def test_the_condition_names_the_field_the_image_where_it_comes_from_and_the_list() -> None:
    allowed = condition(a_set(), a_class())
    assert (allowed.type, allowed.status, allowed.reason) == (
        "ImagesAllowed",
        True,
        "ImagesAllowed",
    )
    assert allowed.message == "every image is on the administrator's image allow-list"
    refused = condition(a_set(), a_class(images=images(runtime=OTHER)))
    assert (refused.status, refused.reason) == (False, "ImageNotAllowed")
    assert refused.message == (
        f'spec.images.runtime.image "{OTHER}" of VirtualTargetClass "qemu": not on the '
        "administrator's image allow-list (allowed prefixes: quay.io/jumpstarter-dev/); "
        "running instances stay, no new instance is created from it"
    )
    # The set's own allowed image wins over the class's refused one.
    assert condition(
        a_set(images=images(runtime=ALLOWED)), a_class(images=images(runtime=OTHER))
    ).status
    own = condition(a_set(images=images(exporter="ghcr.io/me/exporter:1")), None)
    assert own.message.startswith('spec.images.exporter.image "ghcr.io/me/exporter:1" of the set: ')


def observation(images_allowed: bool, **kw: Any) -> Observation:
    vtc = a_class() if images_allowed else a_class(images=images(runtime=OTHER))
    return Observation(
        pool=pool(min_available=4),
        klass=klass(),
        images=condition(a_set(), vtc),
        **kw,
    )


def test_a_refused_image_keeps_the_pool_and_creates_nothing_new() -> None:
    running = (ready("pool-0"), ready("pool-1"), booting("pool-2", minute=1))
    pods = (PodView("pool-0", "pool-0", "Running"), PodView("pool-1", "pool-1", "Running"))
    held = plan(observation(False, exporters=running, pods=pods), T0)
    assert not [a for a in held.actions if isinstance(a, CreateExporter | CreatePod | Remove)]
    assert set(held.keep_current) == {"pool-0", "pool-1"}  # their config Secrets stay current
    assert [w.reason for w in held.waits] == [
        condition(a_set(), a_class(images=images(runtime=OTHER))).message
    ]
    found = status_condition(held, "ImagesAllowed")
    assert (found["status"], found["reason"]) == ("False", "ImageNotAllowed")

    # Allowed again: the pool grows and pool-2 gets its Pod.
    grown = plan(observation(True, exporters=running, pods=pods), T0)
    created = {type(a).__name__ for a in grown.actions if isinstance(a, CreateExporter | CreatePod)}
    assert created == {"CreateExporter", "CreatePod"}
    assert status_condition(grown, "ImagesAllowed")["status"] == "True"


def test_without_a_list_the_status_has_no_image_condition() -> None:
    result = plan(Observation(pool=pool(), klass=klass()), T0)
    conditions: list[dict[str, Any]] = result.status["conditions"]  # type: ignore[assignment]
    assert "ImagesAllowed" not in {c["type"] for c in conditions}


_IMAGE = st.sampled_from(
    [None, OTHER, ALLOWED, "quay.io/jumpstarter-dev/jumpstarter:0.9.1", "ghcr.io/me/x:1"]
)
CREDENTIALS = Credentials("grpc.example.com:443", "t", base64.b64encode(b"PEM").decode())


@settings(deadline=None)
@given(
    set_images=st.fixed_dictionaries({}, optional={"exporter": _IMAGE, "runtime": _IMAGE}),
    class_images=st.fixed_dictionaries({}, optional={"exporter": _IMAGE, "runtime": _IMAGE}),
    existing=st.integers(0, 3),
    warm=st.integers(0, 4),
)
def test_a_new_instance_is_rendered_only_from_allowed_images(
    set_images: dict[str, str | None], class_images: dict[str, str | None], existing: int, warm: int
) -> None:
    exporter_set = a_set(images=images(**{r: i for r, i in set_images.items() if i}))
    vtc = a_class(images=images(**{r: i for r, i in class_images.items() if i}))
    # Running instances, and one whose credentials came but that has no Pod yet.
    exporters = tuple(ready(f"pool-{n}") for n in range(existing))
    pods = tuple(PodView(e.name, e.name, "Running") for e in exporters[1:])
    result = plan(
        Observation(
            pool=pool(min_available=warm),
            klass=klass(),
            exporters=exporters,
            pods=pods,
            images=condition(exporter_set, vtc),
        ),
        T0,
    )
    # A standby gets no Pod: no image is rendered for it.
    new = [a.name for a in result.actions if isinstance(a, CreateExporter) and not a.standby]
    new += [a.exporter for a in result.actions if isinstance(a, CreatePod)]
    if not condition(exporter_set, vtc).status:
        assert new == []
    for name in new:
        exporter = render_exporter(exporter_set, name)
        ctx = instance_context(exporter_set, vtc, exporter, DEFAULT_IMAGES, CREDENTIALS)
        pod = QemuProvisioner().render_pod(ctx)
        containers = pod["spec"].get("initContainers", []) + pod["spec"]["containers"]
        assert all(POLICY.refusal(c["image"]) is None for c in containers), containers
    assert not [a for a in result.actions if isinstance(a, Remove)]  # nothing torn down
