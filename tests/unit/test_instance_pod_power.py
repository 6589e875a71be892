"""An instance Pod has no more power than it needs, whatever the ExporterSet's author wrote.

A property over random templates (labels, annotations, drivers, and keys the schema does
not have), parameters, images, and class scheduling: the rendered Pod carries what the
author chose only at the documented places (images and pull policies, template labels and
annotations; drivers and parameters go to the config Secret, not the Pod, but for the
guest's disk: `storage` sizes the volume `disk`, an emptyDir or a claim of the named
StorageClass with the Pod's fsGroup), and the class's scheduling only at its own
(nodeSelector, tolerations, the resources of the container that runs QEMU: the exporter
in the `exporter` layout, the runtime sidecar in `sidecar`, with the emptyDir disk's
ephemeral storage where they name none). Never
a ServiceAccount token or name, privileged, hostPath, hostNetwork/hostPID/hostIPC or an
added capability; root only in the `sidecar` layout's runtime, as Jumpstarter main renders
it (for /dev/kvm). Both layouts, named by the class's `layout` parameter.
"""

from __future__ import annotations

import base64
import copy
import string
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.images import PULL_POLICIES
from api.provisioners.qemu_storage import GuestDisk, QemuStorage, guest_disk
from pool.model.jumpstarter import EXPORTER_UID, readiness_command
from pool.model.keys import NAME_LABEL
from pool.rendering.provisioners.disk import disk_volume
from pool.rendering.provisioners.qemu import DEFAULT_IMAGES, QemuProvisioner
from pool.rendering.render import Credentials, instance_context, render_exporter
from tests.unit.test_webhook_support import a_class, a_set

PLUGIN = QemuProvisioner()
CREDENTIALS = Credentials("grpc.example.com:443", "t", base64.b64encode(b"PEM").decode())
RUNTIME = "target-runtime"
POD_FIELDS = {
    "restartPolicy",
    "securityContext",  # the claim's fsGroup, nothing else
    "automountServiceAccountToken",
    "shareProcessNamespace",  # the sidecar layout's, so that its runtime ends on SIGTERM
    "initContainers",
    "containers",
    "volumes",
    "nodeSelector",
    "tolerations",
}
CONTAINER_FIELDS = {
    "name",
    "image",
    "imagePullPolicy",
    "command",
    "restartPolicy",
    "env",
    "envFrom",
    "securityContext",
    "resources",
    "volumeMounts",
    # the exporter's: a process check on `jmp run` (while it starts, then after) and its
    # termination message
    "startupProbe",
    "readinessProbe",
    "terminationMessagePolicy",
}
# Keys an author might try to smuggle into the Pod through the set (the CRD's structural
# schema prunes them; the reconciler must ignore them even if it did not).
SMUGGLED = {
    "hostNetwork": True,
    "hostPID": True,
    "hostIPC": True,
    "serviceAccountName": "cluster-admin",
    "automountServiceAccountToken": True,
    "securityContext": {"privileged": True, "runAsUser": 0},
    "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    "containers": [{"name": "x", "image": "evil/x", "securityContext": {"privileged": True}}],
    "capabilities": {"add": ["SYS_ADMIN"]},
}

_WORD = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=8)
_SCALAR = st.none() | st.booleans() | st.integers(-5, 100) | _WORD
_JSON = _SCALAR | st.lists(_SCALAR, max_size=3) | st.dictionaries(_WORD, _SCALAR, max_size=3)
_IMAGE = st.builds(
    lambda host, path, tag: f"{host}.example.com/{'/'.join(path)}:{tag}",
    _WORD,
    st.lists(_WORD, min_size=1, max_size=3),
    _WORD,
)
_IMAGES = st.fixed_dictionaries(
    {},
    optional={
        role: st.fixed_dictionaries(
            {"image": _IMAGE}, optional={"imagePullPolicy": st.sampled_from(PULL_POLICIES)}
        )
        for role in ("exporter", "runtime")
    },
)
_LABELS = st.dictionaries(_WORD, _WORD, max_size=4)
_DRIVER = st.fixed_dictionaries(
    {"name": _WORD, "type": st.sampled_from(["jumpstarter_driver_qemu.driver.Qemu", "x.Y"])},
    optional={"config": st.dictionaries(_WORD, _JSON, max_size=3)},
)
_SMUGGLED = st.dictionaries(st.sampled_from(sorted(SMUGGLED)), st.just(None), max_size=4).map(
    lambda keys: {k: copy.deepcopy(SMUGGLED[k]) for k in keys}
)
_QUANTITY = st.sampled_from(["1", "500m", "2Gi", "128Mi"])
_SCHEDULING = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": _LABELS,
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {"key": _WORD, "operator": st.sampled_from(["Exists", "Equal"])},
                optional={"effect": st.sampled_from(["NoSchedule", "NoExecute"])},
            ),
            max_size=2,
        ),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                section: st.dictionaries(
                    st.sampled_from(["cpu", "memory", "devices.kubevirt.io/kvm"]), _QUANTITY
                )
                for section in ("limits", "requests")
            },
        ),
    },
)


LAYOUTS = ("exporter", "sidecar")
_STORAGE = st.fixed_dictionaries(
    {},
    optional={
        "storage": st.fixed_dictionaries(
            {},
            optional={
                "size": st.sampled_from(["1Gi", "20Gi"]),
                "storageClassName": st.sampled_from(["", "local-disks"]),
            },
        )
    },
)


@st.composite
def authored(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A set and its class, with what their authors may write and what they may try."""
    labels = draw(_LABELS)
    template: dict[str, Any] = {
        "metadata": {"labels": labels, "annotations": draw(_LABELS)},
        "spec": {"drivers": draw(st.lists(_DRIVER, max_size=3)), **draw(_SMUGGLED)},
        **draw(_SMUGGLED),
    }
    exporter_set = a_set(
        template=template,
        images=draw(_IMAGES),
        parameters=draw(st.dictionaries(_WORD, _JSON, max_size=3)),
        recycleStrategy=draw(st.sampled_from(["ExitAndReplace", "InPlaceReuse"])),
        **draw(_SMUGGLED),
    )
    klass = a_class(
        images=draw(_IMAGES),
        scheduling=draw(_SCHEDULING),
        parameters={"layout": draw(st.sampled_from(LAYOUTS)), **draw(_STORAGE)},
    )
    if draw(st.booleans()):
        klass["spec"]["credentialsSecretRef"] = {"name": draw(_WORD)}
    return exporter_set, klass


def _with_disk(scheduling: dict[str, Any], disk: GuestDisk) -> dict[str, Any]:
    """The class's resources, and an emptyDir disk's ephemeral storage (the strategy's
    resources name none)."""
    resources = copy.deepcopy(scheduling.get("resources", {}))
    if not disk.storage_class:
        for kind in ("requests", "limits"):
            resources[kind] = {**resources.get(kind, {}), "ephemeral-storage": disk.volume}
    return resources


def render(exporter_set: dict[str, Any], klass: dict[str, Any]) -> dict[str, Any]:
    exporter = render_exporter(exporter_set, "pool-a-0")
    exporter["metadata"]["uid"] = "uid-0"
    ctx = instance_context(exporter_set, klass, exporter, DEFAULT_IMAGES, CREDENTIALS)
    return PLUGIN.render_pod(ctx)


AUTHOR_MAPS = (".metadata.labels", ".metadata.annotations", ".spec.nodeSelector")


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}[{index}]")


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def masked(pod: dict[str, Any]) -> dict[str, Any]:
    """The Pod without the documented places its inputs reach."""
    pod = copy.deepcopy(pod)
    pod["metadata"].pop("labels")
    pod["metadata"].pop("annotations", None)
    for key in ("nodeSelector", "tolerations", "securityContext"):
        pod["spec"].pop(key, None)
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "disk"]
    for container in containers(pod):
        for key in ("image", "imagePullPolicy", "resources", "envFrom"):
            container.pop(key, None)
    return pod


SKELETONS = {
    layout: masked(render(a_set(), a_class(parameters={"layout": layout}))) for layout in LAYOUTS
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(authored())
def test_the_pod_has_only_documented_author_fields_and_no_extra_power(
    given_objects: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    exporter_set, klass = given_objects
    pod = render(exporter_set, klass)
    spec = pod["spec"]
    # The guest's disk: the class's storage (the set's random keys are none of the model's).
    storage = klass["spec"]["parameters"].get("storage", {})
    disk = guest_disk(QemuStorage.model_validate(storage))
    (volume,) = [v for v in spec["volumes"] if v["name"] == "disk"]
    assert volume == disk_volume(disk)
    assert spec.get("securityContext") == (
        {"fsGroup": EXPORTER_UID} if disk.storage_class else None
    )

    # Everything but the documented places is the same for every input of a layout.
    layout = klass["spec"]["parameters"]["layout"]
    assert masked(pod) == SKELETONS[layout]
    # The documented places carry exactly their inputs.
    template = exporter_set["spec"]["template"]["metadata"]
    assert pod["metadata"]["labels"] == {
        **template["labels"],
        NAME_LABEL: "pool-a",
    }
    assert pod["metadata"].get("annotations", {}) == template["annotations"]
    scheduling = klass["spec"]["scheduling"]
    assert spec.get("nodeSelector", {}) == scheduling.get("nodeSelector", {})
    assert spec.get("tolerations", []) == scheduling.get("tolerations", [])
    for container in containers(pod):
        role = "runtime" if container["name"] == RUNTIME else "exporter"
        chosen = [o["spec"]["images"].get(role, {}) for o in (exporter_set, klass)] + [
            {"image": DEFAULT_IMAGES[role].image}
        ]
        assert container["image"] == next(c["image"] for c in chosen if c.get("image"))
        policy = next((c["imagePullPolicy"] for c in chosen if c.get("imagePullPolicy")), None)
        assert container.get("imagePullPolicy") == policy
        runs_qemu = RUNTIME if layout == "sidecar" else "exporter"
        if container["name"] == runs_qemu:
            assert container.get("resources", {}) == _with_disk(scheduling, disk)
        else:
            assert "resources" not in container

    # No power beyond what the instance needs.
    assert set(spec) <= POD_FIELDS
    assert spec["automountServiceAccountToken"] is False
    assert spec.get("shareProcessNamespace", False) is (layout == "sidecar")
    for name in ("serviceAccountName", "serviceAccount", "hostNetwork", "hostPID", "hostIPC"):
        assert name not in spec
    kinds = {next(iter(set(v) - {"name"})) for v in spec["volumes"]}
    assert kinds - {"ephemeral"} == {"emptyDir", "secret"} or kinds == {"ephemeral", "secret"}
    # The author's own maps (labels, annotations, nodeSelector) were checked above to be
    # exactly their inputs; their keys are names, not fields, so the walk leaves them out.
    for path, node in walk(pod):
        if isinstance(node, dict) and not path.endswith(AUTHOR_MAPS):
            assert "privileged" not in node, path
            assert "hostPath" not in node, path
            assert not node.get("add"), path  # capabilities.add
    for container in containers(pod):
        assert set(container) <= CONTAINER_FIELDS
        security = container["securityContext"]
        if container["name"] == RUNTIME:
            # Root for /dev/kvm, as the contract says, and nothing more.
            assert security == {"runAsUser": 0, "runAsNonRoot": False}
        else:
            assert security == {
                "runAsUser": EXPORTER_UID,
                "runAsNonRoot": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            }


def test_the_exporter_is_checked_often_while_it_starts_and_seldom_after() -> None:
    """One process check for both probes: every 2 s until `jmp run` first serves (the
    kubelet then runs the readiness check at once), every 10 s after, and a start that
    never serves failed after 5 minutes."""
    for layout in LAYOUTS:
        pod = render(a_set(), a_class(parameters={"layout": layout}))
        (exporter,) = [c for c in containers(pod) if c["name"] == "exporter"]
        startup, ready = exporter["startupProbe"], exporter["readinessProbe"]
        assert startup["exec"] == ready["exec"] == {"command": readiness_command()}
        assert (startup["periodSeconds"], ready["periodSeconds"]) == (2, 10)
        assert startup["periodSeconds"] * startup["failureThreshold"] == 300
