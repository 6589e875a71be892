"""Admission through kube-apiserver: the webhook registered from the rendered deploy
manifests, called over TLS with the CA bundle from `certs/`, as a cluster would call it.

Assertions are on the full text kubectl prints, so a person's view of every denial and
warning is pinned here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import REPO_ROOT, ControlPlane
from harness.stack import (
    WebhookServer,
)
from tests.e2e.examples import (
    CROSS_OBJECT_DENIAL,
    cross_object_case,
)
from tests.e2e.objects import exporter_set, get_json, try_apply, virtual_target_class

EXAMPLES = REPO_ROOT / "examples"


def _example(path: Path, namespace: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    document["metadata"]["namespace"] = namespace
    return document


def test_examples_defaulted_as_documented(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    vtc = _example(EXAMPLES / "virtualtargetclass-qemu.yaml", namespace)
    del vtc["spec"]["bindingMode"], vtc["spec"]["reclaimPolicy"]
    vtc["spec"]["caBundleConfigMapRef"] = {"name": "corporate-ca"}
    result = try_apply(control_plane, vtc, _example(EXAMPLES / "exporterset-qemu.yaml", namespace))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    stored = get_json(control_plane, "virtualtargetclass", "qemu-x86", "-n", namespace)["spec"]
    assert stored["bindingMode"] == "Immediate"
    assert stored["reclaimPolicy"] == "Delete"
    assert stored["caBundleConfigMapRef"] == {"name": "corporate-ca", "key": "ca-bundle.crt"}
    # What the file does not say it gets from the documents; what it says it keeps.
    spec = get_json(control_plane, "exporterset", "fedora-x86", "-n", namespace)["spec"]
    assert spec["maxReplicas"] == 8
    assert spec["scaleDownCooldown"] == "10m"
    drivers = spec["template"]["spec"]["drivers"]
    assert [d["name"] for d in drivers] == ["qemu", "power", "serial"]


def test_template_labels_come_from_the_selector(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    result = try_apply(control_plane, exporter_set("bare", namespace, class_name="not-yet"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f'Warning: VirtualTargetClass "not-yet" not found in namespace "{namespace}"; '
        "no instances are created until it exists\n"
    )
    spec = get_json(control_plane, "exporterset", "bare", "-n", namespace)["spec"]
    assert spec["template"]["metadata"]["labels"] == {"pool": "bare"}
    assert spec["maxReplicas"] == 4
    assert spec["minReplicas"] == 0
    assert spec["scaleDownCooldown"] == "5m"
    assert spec["recycleStrategy"] == "ExitAndReplace"


def test_warm_buffer_with_wait_for_first_consumer_is_denied(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    lazy, warm = cross_object_case(namespace)
    assert try_apply(control_plane, lazy).returncode == 0
    result = try_apply(control_plane, warm)
    assert result.returncode == 1
    assert result.stderr == CROSS_OBJECT_DENIAL
    # `warm-buffer: auto` asks for nothing such a class keeps: admitted, with a warning.
    auto = exporter_set("auto", namespace, class_name="lazy", minAvailableReplicas=0)
    auto["metadata"]["annotations"] = {"virtualtarget.jumpstarter.dev/warm-buffer": "auto"}
    result = try_apply(control_plane, auto)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "Warning: virtualtarget.jumpstarter.dev/warm-buffer: auto has no effect: "
        'class "lazy" binds WaitForFirstConsumer, keeps none warm\n'
    )


def test_jumpstarter_shaped_parameters_are_admitted_and_bad_values_denied(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    """The class and set JEP-0014 publishes are admitted; an unknown key is a warning; a bad
    `resources.cpu` or `firmware.digest` is denied with its path."""
    parameters = {
        "machineType": "virt",
        "firmware": {"url": "registry.example.com/firmware/rpi4:latest"},
        "resources": {"cpu": 4, "memory": "4Gi"},
        "storage": {"size": "16Gi"},
    }
    result = try_apply(
        control_plane, virtual_target_class("rpi4", namespace, parameters=parameters)
    )
    assert (result.returncode, result.stderr) == (0, "")
    memory = {"resources": {"memory": "8Gi"}}
    result = try_apply(
        control_plane, exporter_set("rpi4", namespace, class_name="rpi4", parameters=memory)
    )
    assert (result.returncode, result.stderr) == (0, "")

    colour = {**memory, "colour": "red"}
    result = try_apply(
        control_plane, exporter_set("rpi4", namespace, class_name="rpi4", parameters=colour)
    )
    assert result.returncode == 0
    assert result.stderr == (
        "Warning: spec.parameters.colour: unknown parameter, passed through "
        "(known: arch, machineType, firmware, resources, storage, …)\n"
    )

    bad = {"resources": {"cpu": 0}, "firmware": {"digest": "sha256:not-hex"}}
    result = try_apply(
        control_plane, exporter_set("bad", namespace, class_name="rpi4", parameters=bad)
    )
    assert result.returncode == 1
    assert result.stderr == (
        'The ExporterSet "bad" is invalid: \n'
        '* spec.parameters.firmware.digest: Invalid value: "sha256:not-hex": String should '
        "match pattern '^sha256:[0-9a-f]{64}$' "
        "(qemu.jumpstarter.dev, class and set parameters merged)\n"
        "* spec.parameters.resources.cpu: Invalid value: 0: Input should be greater than or "
        "equal to 1 (qemu.jumpstarter.dev, class and set parameters merged)\n"
    )
    result = try_apply(
        control_plane,
        virtual_target_class("bad", namespace, parameters={"resources": {"cpu": "four"}}),
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        'The VirtualTargetClass "bad" is invalid: spec.parameters.resources.cpu: Invalid '
        'value: "four": Input should be a valid integer'
    )


def test_bad_storage_values_are_denied_naming_each_field_and_the_old_key_warned_of(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    storage = {"size": 20, "fsOverhead": "10", "accessModes": ["ReadWriteOncePod", "Bogus"]}
    result = try_apply(
        control_plane, virtual_target_class("disk", namespace, parameters={"storage": storage})
    )
    assert result.returncode == 1
    assert result.stderr == (
        'The VirtualTargetClass "disk" is invalid: \n'
        '* spec.parameters.storage.size: Invalid value: 20: must be a string such as "10Gi", '
        "not a number (qemu.jumpstarter.dev)\n"
        '* spec.parameters.storage.fsOverhead: Invalid value: "10": must be a whole percentage '
        'such as "10%" (qemu.jumpstarter.dev)\n'
        '* spec.parameters.storage.accessModes[1]: Invalid value: "Bogus": Input should be '
        "'ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany' or 'ReadWriteOncePod' "
        "(qemu.jumpstarter.dev)\n"
    )
    legacy = {"resources": {"storage": "16Gi"}}
    result = try_apply(control_plane, virtual_target_class("old", namespace, parameters=legacy))
    assert (result.returncode, result.stderr) == (
        0,
        "Warning: spec.parameters.resources.storage: deprecated: use "
        "spec.parameters.storage.size, which wins where both are set\n",
    )


def test_class_in_use_cannot_be_deleted(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    assert (
        try_apply(
            control_plane,
            virtual_target_class("used", namespace),
            exporter_set("user-a", namespace, class_name="used"),
            exporter_set("user-b", namespace, class_name="used"),
        ).returncode
        == 0
    )
    result = control_plane.kubectl(
        "delete", "virtualtargetclass", "used", "-n", namespace, check=False
    )
    assert result.returncode == 1
    assert result.stderr == (
        'The VirtualTargetClass "used" is invalid: metadata.name: Forbidden: '
        "VirtualTargetClass is in use by ExporterSets user-a, user-b; delete or move them first\n"
    )
    control_plane.kubectl("delete", "exporterset", "user-a", "user-b", "-n", namespace)
    control_plane.kubectl("delete", "virtualtargetclass", "used", "-n", namespace)


def test_selector_and_class_are_immutable(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    assert (
        try_apply(control_plane, exporter_set("fixed", namespace, class_name="a")).returncode == 0
    )
    moved = exporter_set("fixed", namespace, class_name="b")
    moved["spec"]["selector"] = {"matchLabels": {"pool": "other"}}
    moved["spec"]["template"] = {"metadata": {"labels": {"pool": "other"}}}
    result = try_apply(control_plane, moved)
    assert result.returncode == 1
    assert result.stderr == (
        f'Warning: VirtualTargetClass "b" not found in namespace "{namespace}"; '
        "no instances are created until it exists\n"
        'The ExporterSet "fixed" is invalid: \n'
        '* spec.selector: Invalid value: {"matchLabels":{"pool":"other"}}: field is immutable\n'
        '* spec.virtualTargetClassName: Invalid value: "b": field is immutable\n'
    )


def test_bad_class_reports_every_field(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    bad = virtual_target_class(
        "bad",
        namespace,
        provisioner="QEMU provisioner",
        scheduling={
            "nodeSelector": {"bad key!": "v"},
            "resources": {"requests": {"memory": "4Gi"}, "limits": {"memory": "2Gi"}},
            "tolerations": [{"key": "k", "operator": "Equal", "effect": "NoRun"}],
        },
        caBundleConfigMapRef={"key": "ca.crt"},
    )
    result = try_apply(control_plane, bad)
    assert result.returncode == 1
    assert result.stderr == (
        'The VirtualTargetClass "bad" is invalid: \n'
        '* spec.provisioner: Invalid value: "QEMU provisioner": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character\n"
        "* spec.caBundleConfigMapRef.name: Required value: the reference must name its ConfigMap\n"
        '* spec.scheduling.nodeSelector: Invalid value: "bad key!": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character\n"
        '* spec.scheduling.resources.requests.memory: Invalid value: "4Gi": must be less than or '
        "equal to memory limit of 2Gi\n"
        '* spec.scheduling.tolerations[0].effect: Unsupported value: "NoRun": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"\n'
    )


def test_exporter_enabled_defaults_to_true_and_an_explicit_false_stays(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    fenced = _example(EXAMPLES / "exporter.yaml", namespace)
    fresh = _example(EXAMPLES / "exporter.yaml", namespace)
    fresh["metadata"]["name"] = "fresh"
    del fresh["spec"]["enabled"]
    result = try_apply(control_plane, fenced, fresh)
    assert result.returncode == 0, result.stderr
    assert get_json(control_plane, "exporter", "fresh", "-n", namespace)["spec"]["enabled"] is True
    name = fenced["metadata"]["name"]
    assert get_json(control_plane, "exporter", name, "-n", namespace)["spec"]["enabled"] is False


def test_warm_buffer_annotations_are_denied_with_their_names(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    apply_class = try_apply(control_plane, virtual_target_class("qemu", namespace))
    assert apply_class.returncode == 0, apply_class.stderr
    auto = exporter_set("auto", namespace, class_name="qemu")
    auto["metadata"]["annotations"] = {
        "virtualtarget.jumpstarter.dev/warm-buffer": "auto",
        "virtualtarget.jumpstarter.dev/target-lease-wait": "30s",
    }
    result = try_apply(control_plane, auto)
    assert (result.returncode, result.stderr) == (0, "")
    bad = exporter_set("bad", namespace, class_name="qemu")
    bad["metadata"]["annotations"] = {
        "virtualtarget.jumpstarter.dev/warm-buffer": "yes",
        "virtualtarget.jumpstarter.dev/target-lease-wait": "half a minute",
    }
    result = try_apply(control_plane, bad)
    assert result.returncode == 1
    assert result.stderr == (
        'The ExporterSet "bad" is invalid: \n'
        "* metadata.annotations[virtualtarget.jumpstarter.dev/warm-buffer]: Invalid value: "
        '"yes": must be "auto" (or absent: minAvailableReplicas)\n'
        "* metadata.annotations[virtualtarget.jumpstarter.dev/target-lease-wait]: Invalid "
        "value: \"half a minute\": invalid duration 'half a minute': expected a number "
        "followed by one of ns, us, ms, s, m, h\n"
    )


def test_the_rollout_annotation_takes_only_paused(
    control_plane: ControlPlane, webhook: WebhookServer, namespace: str
) -> None:
    pool = exporter_set("rolled", namespace, class_name="qemu")
    pool["metadata"]["annotations"] = {"virtualtarget.jumpstarter.dev/rollout": "paused"}
    assert try_apply(control_plane, pool).returncode == 0
    pool["metadata"]["annotations"] = {"virtualtarget.jumpstarter.dev/rollout": "later"}
    result = try_apply(control_plane, pool)
    assert result.returncode == 1
    assert result.stderr.endswith(
        'The ExporterSet "rolled" is invalid: '
        "metadata.annotations[virtualtarget.jumpstarter.dev/rollout]: Unsupported value: "
        '"later": supported values: "paused" (remove the annotation to resume)\n'
    )
    stored = get_json(control_plane, "exportersets", "rolled", "-n", namespace)
    assert stored["metadata"]["annotations"]["virtualtarget.jumpstarter.dev/rollout"] == "paused"
