"""The in-process reads (`harness.kubeget`) print what `kubectl get -o json` prints, against a
real kube-apiserver: lists by label, single objects, the fields kubectl drops, and the
error for an object that is not there."""

from __future__ import annotations

import json

import pytest

from harness import kubeget
from harness.controlplane import ControlPlane, ControlPlaneError
from tests.e2e.objects import apply, exporter_set, virtual_target_class


def kubectl_json(plane: ControlPlane, *args: str) -> dict:
    return json.loads(plane.kubectl("get", *args, "-o", "json").stdout)


def test_reads_in_process_print_what_kubectl_prints(
    control_plane: ControlPlane, namespace: str
) -> None:
    plane, ns = control_plane, namespace
    for name, board in (("a", "x"), ("b", "y")):
        meta = {"name": name, "namespace": ns, "labels": {"board": board}}
        apply(plane, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    apply(plane, virtual_target_class("qemu", ns))
    apply(plane, exporter_set("pool", ns, class_name="qemu", with_template=True))
    for args in (
        ("configmaps", "-n", ns, "-l", "board=x"),
        ("cm", "b", "-n", ns),
        ("exporterset", "pool", "-n", ns),
        ("exportersets", "-n", ns),
        ("virtualtargetclass", "qemu", "-n", ns),
        ("configmap", "a", "-n", ns, "--show-managed-fields"),
        ("serviceaccounts", "-n", ns),
        ("deployments", "-n", ns),
    ):
        query = kubeget.parse(args)
        assert query is not None, args
        assert kubeget.get(plane, query) == kubectl_json(plane, *args), args


@pytest.mark.parametrize(
    "args",
    [
        ("exporters,pods", "-n", "x"),
        ("lease", "-n", "x"),
        ("pods", "-A"),
        ("pods", "a", "-l", "b=c"),
    ],
)
def test_what_it_does_not_answer_is_left_to_kubectl(args: tuple[str, ...]) -> None:
    assert kubeget.parse(args) is None


def test_a_missing_object_fails_as_kubectl_fails(
    control_plane: ControlPlane, namespace: str
) -> None:
    query = kubeget.parse(("exporter", "absent", "-n", namespace))
    assert query is not None
    with pytest.raises(ControlPlaneError, match=r"\(NotFound\).*absent"):
        kubeget.get(control_plane, query)
    with pytest.raises(ControlPlaneError, match="NotFound"):
        control_plane.kubectl("get", "exporter", "absent", "-n", namespace)
