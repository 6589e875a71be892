"""Admission of a pool whose images and QEMU layout disagree, through the webhook's
validators (no cluster): refused where every instance would fail, warned of where the
guest could not start or an image would not run."""

from __future__ import annotations

from typing import Any

import pytest

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE
from tests.unit.test_webhook_crossobject import validate
from tests.unit.test_webhook_support import a_class, a_set
from webhook.checks_class import check_class

QEMU = {"name": "qemu", "type": "jumpstarter_driver_qemu.driver.Qemu"}
MOCK = {"name": "power", "type": "jumpstarter_driver_power.driver.MockPower"}
MAIN = "quay.io/jumpstarter-dev/jumpstarter:latest"
RELEASED = "quay.io/jumpstarter-dev/jumpstarter:0.9.0"
RUNTIME = {"runtime": {"image": "quay.io/jumpstarter-dev/virtual/qemu-runtime:latest"}}


def pool(drivers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    exporter_set = a_set(**spec)
    exporter_set["spec"]["template"]["spec"]["drivers"] = drivers
    return exporter_set


def exporter_image(image: str) -> dict[str, Any]:
    return {"exporter": {"image": image}}


def test_sidecar_on_a_released_exporter_image_is_refused() -> None:
    """0.9.0's QEMU driver refuses `launcher_socket`: every instance would fail."""
    sidecar = a_class(parameters={"layout": "sidecar"})
    outcome = validate([sidecar], pool([QEMU]))  # the default images: 0.9.0
    assert [str(e) for e in outcome.errors] == [
        'spec.parameters.layout: Invalid value: "sidecar": the exporter image '
        f"{RELEASED} is Jumpstarter 0.9.0 or older, whose QEMU driver refuses "
        "launcher_socket: name an exporter image built from Jumpstarter main in "
        "spec.images.exporter, or use layout exporter (class and set parameters merged)"
    ]
    for allowed in (
        pool([QEMU], images=exporter_image(MAIN)),  # main's exporter
        pool([MOCK]),  # no QEMU entry gets launcher_socket
        pool([QEMU], parameters={"layout": "exporter"}, images=exporter_image(QEMU_EXPORTER_IMAGE)),
    ):
        assert validate([sidecar], allowed).allowed


@pytest.mark.parametrize(
    ("layout", "image", "warned"),
    [
        ("exporter", RELEASED, True),
        ("exporter", MAIN, True),  # no published exporter image carries QEMU
        (None, RELEASED, True),  # unset: fails under either entry point's default
        (None, MAIN, False),  # unset: runs under exporter-set-controller's sidecar
        ("exporter", QEMU_EXPORTER_IMAGE, False),
        (None, QEMU_EXPORTER_IMAGE, False),
    ],
)
def test_a_qemu_pool_on_an_image_without_qemu_is_warned_of(
    layout: str | None, image: str, warned: bool
) -> None:
    parameters = {"layout": layout} if layout else {}
    klass = a_class(parameters=parameters, images=exporter_image(image))
    outcome = validate([klass], pool([QEMU]))
    assert outcome.allowed
    expected = f"spec.images.exporter: {image} has no QEMU, which layout exporter runs there"
    assert outcome.warnings == ([expected] if warned else [])
    assert all(len(w) <= 120 for w in outcome.warnings)
    assert validate([klass], pool([MOCK])).warnings == []  # no QEMU entry: nothing to boot


def test_a_runtime_image_the_named_exporter_layout_does_not_run_is_warned_of() -> None:
    shipped = exporter_image(QEMU_EXPORTER_IMAGE)
    klass = a_class(parameters={"layout": "exporter"}, images={**shipped, **RUNTIME})
    assert check_class(klass).warnings == [
        "spec.images.runtime: not run: layout exporter runs QEMU in the exporter's container "
        "(named by the class)"
    ]
    outcome = validate(
        [a_class(parameters={"layout": "exporter"}, images=shipped)], pool([QEMU], images=RUNTIME)
    )
    assert outcome.allowed and outcome.warnings == [
        "spec.images.runtime: not run: layout exporter runs QEMU in the exporter's container "
        "(named by the set)"
    ]
    # Unset, a runtime image may be what exporter-set-controller's sidecar runs.
    assert check_class(a_class(images={**shipped, **RUNTIME})).warnings == []
    assert validate([a_class(images=shipped)], pool([QEMU], images=RUNTIME)).warnings == []
    sidecar = a_class(parameters={"layout": "sidecar"}, images={**exporter_image(MAIN), **RUNTIME})
    assert check_class(sidecar).warnings == [] and validate([sidecar], pool([QEMU])).warnings == []


def test_an_unknown_layout_is_denied_with_the_known_ones() -> None:
    outcome = validate([a_class()], pool([QEMU], parameters={"layout": "vm"}))
    (error,) = outcome.errors
    assert str(error).startswith('spec.parameters.layout: Invalid value: "vm": Input should be')
    assert "'exporter' or 'sidecar'" in str(error)
