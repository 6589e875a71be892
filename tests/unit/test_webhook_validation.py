"""Single-object validation: every rule and webhook-only check, every error reported."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.test_webhook_support import a_class, a_set, an_exporter, schema_source
from webhook.validator import validate_object


def errors_of(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in validate_object(kind, obj, schema_source, old).errors]


def set_errors(**spec: Any) -> list[str]:
    return errors_of("ExporterSet", a_set(**spec))


def class_errors(**spec: Any) -> list[str]:
    return errors_of("VirtualTargetClass", a_class(**spec))


def test_valid_objects_pass() -> None:
    assert set_errors(minReplicas=1, maxReplicas=4, minAvailableReplicas=2) == []
    assert class_errors(bindingMode="Immediate") == []
    assert errors_of("Exporter", an_exporter(enabled=False)) == []


def test_counts_must_not_be_negative() -> None:
    assert set_errors(minReplicas=-1) == [
        "spec.minReplicas: Invalid value: -1: should be a non-negative integer"
    ]
    assert len(set_errors(maxReplicas=-1, minAvailableReplicas=-2)) == 2


def test_floor_and_warm_buffer_at_most_the_ceiling_unless_unbounded() -> None:
    assert set_errors(minReplicas=5, maxReplicas=4) == [
        "spec.minReplicas: Invalid value: 5: must be less than or equal to spec.maxReplicas (4)"
    ]
    assert set_errors(minAvailableReplicas=5, maxReplicas=4) == [
        "spec.minAvailableReplicas: Invalid value: 5: must be less than or equal to "
        "spec.maxReplicas (4)"
    ]
    assert set_errors(minReplicas=50, minAvailableReplicas=50, maxReplicas=0) == []


def test_a_ceiling_of_zero_is_no_ceiling_and_the_warning_says_so() -> None:
    """No admitted pool is unable to serve: 0 is unbounded, and a person is told."""
    unbounded = validate_object("ExporterSet", a_set(maxReplicas=0), schema_source)
    assert unbounded.warnings == [
        "spec.maxReplicas: 0 means no ceiling: the pool may grow without bound"
    ]
    assert validate_object("ExporterSet", a_set(maxReplicas=1), schema_source).warnings == []


@pytest.mark.parametrize("good", ["300s", "5m", "1h30m", "0", "1.5h", "10ms"])
def test_cooldown_accepts_go_durations(good: str) -> None:
    assert set_errors(scaleDownCooldown=good) == []


@pytest.mark.parametrize("bad", ["1d", "5 m", "-5m", "5", "", "m", "5M"])
def test_cooldown_refuses_what_go_refuses_and_negatives(bad: str) -> None:
    assert set_errors(scaleDownCooldown=bad) == [
        f'spec.scaleDownCooldown: Invalid value: "{bad}": must be a non-negative Go duration '
        "such as 300s, 5m or 1h30m"
    ]


def test_selector_required_non_empty_and_well_formed() -> None:
    obj = a_set()
    del obj["spec"]["selector"]
    assert errors_of("ExporterSet", obj) == ["spec.selector: Required value"]
    assert set_errors(selector={}) == [
        "spec.selector: Invalid value: {}: empty selector is invalid for an ExporterSet"
    ]
    errors = set_errors(
        selector={
            "matchLabels": {"pool": "a", "bad key!": "x"},
            "matchExpressions": [
                {"key": "tier", "operator": "Near", "values": ["x"]},
                {"key": "zone", "operator": "In"},
                {"key": "gpu", "operator": "Exists", "values": ["yes"]},
            ],
        }
    )
    assert any(e.startswith('spec.selector.matchLabels: Invalid value: "bad key!"') for e in errors)
    assert any(
        e.startswith("spec.selector.matchExpressions[0].operator: Unsupported value")
        for e in errors
    )
    assert (
        "spec.selector.matchExpressions[1].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'"
    ) in errors
    assert any(e.startswith("spec.selector.matchExpressions[2].values: Forbidden") for e in errors)


def test_selector_must_match_the_template_labels() -> None:
    errors = set_errors(template={"metadata": {"labels": {"pool": "b"}}})
    assert len(errors) == 1
    assert errors[0].startswith(
        'spec.template.metadata.labels: Invalid value: {"pool":"b"}: must match'
    )


def test_selector_expressions_must_match_the_template_labels() -> None:
    selector = {
        "matchLabels": {"pool": "a"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}],
    }
    errors = set_errors(selector=selector)
    assert len(errors) == 1 and "matchExpressions" in errors[0]
    assert (
        set_errors(
            selector=selector, template={"metadata": {"labels": {"pool": "a", "tier": "gold"}}}
        )
        == []
    )


def test_template_label_syntax() -> None:
    errors = set_errors(
        selector={"matchExpressions": [{"key": "pool", "operator": "Exists"}]},
        template={"metadata": {"labels": {"pool": "has space"}}},
    )
    assert errors and errors[0].startswith(
        'spec.template.metadata.labels.pool: Invalid value: "has space"'
    )


def test_class_name_required_and_an_object_name() -> None:
    obj = a_set()
    del obj["spec"]["virtualTargetClassName"]
    assert errors_of("ExporterSet", obj) == ["spec.virtualTargetClassName: Required value"]
    assert set_errors(virtualTargetClassName="") == [
        'spec.virtualTargetClassName: Invalid value: "": must name a VirtualTargetClass'
    ]
    assert set_errors(virtualTargetClassName="Not_A_Name")[0].startswith(
        'spec.virtualTargetClassName: Invalid value: "Not_A_Name": a lowercase RFC 1123'
    )
    assert set_errors(virtualTargetClassName="a" * 254) == [
        f'spec.virtualTargetClassName: Invalid value: "{"a" * 254}": may not be more than '
        "253 chars long",
        f'spec.virtualTargetClassName: Invalid value: "{"a" * 254}": must be no more than '
        "253 characters",
    ]


def test_the_schema_s_required_fields_and_lengths_are_checked_offline() -> None:
    drivers = [{"type": "a.B"}, {"name": "", "type": "a.B"}, {"name": "x" * 254, "type": "a.B"}]
    errors = set_errors(
        template={"metadata": {"labels": {"pool": "a"}}, "spec": {"drivers": drivers}}
    )
    assert errors == [
        "spec.template.spec.drivers[0].name: Required value",
        'spec.template.spec.drivers[1].name: Invalid value: "": should be at least 1 chars long',
        f'spec.template.spec.drivers[2].name: Invalid value: "{"x" * 254}": may not be more '
        "than 253 chars long",
    ]
    no_selector = a_set()
    del no_selector["spec"]["selector"]
    assert errors_of("ExporterSet", no_selector) == ["spec.selector: Required value"]


def test_drivers_names_unique_type_xor_ref_no_config_with_ref() -> None:
    drivers = [
        {"name": "power", "type": "a.B"},
        {"name": "power", "ref": "power"},
        {"type": "a.C"},
        {"name": "both", "type": "a.D", "ref": "x"},
        {"name": "neither"},
        {"name": "cfg", "ref": "power", "config": {"x": 1}},
    ]
    errors = set_errors(
        template={"metadata": {"labels": {"pool": "a"}}, "spec": {"drivers": drivers}}
    )
    assert 'spec.template.spec.drivers[1].name: Duplicate value: "power"' in errors
    assert "spec.template.spec.drivers[2].name: Required value" in errors
    assert any(e.startswith("spec.template.spec.drivers[3]: Invalid value") for e in errors)
    assert any(e.startswith("spec.template.spec.drivers[4]: Invalid value") for e in errors)
    assert (
        "spec.template.spec.drivers[5].config: Forbidden: may not be set together with ref"
        in errors
    )


def test_images_and_pull_policies() -> None:
    images = {
        "exporter": {
            "image": "quay.io/jumpstarter-dev/jumpstarter:0.7",
            "imagePullPolicy": "Always",
        },
        "runtime": {"image": "Quay.io/Org/Repo:tag", "imagePullPolicy": "Sometimes"},
    }
    errors = set_errors(images=images)
    assert any(
        e.startswith('spec.images.runtime.image: Invalid value: "Quay.io/Org/Repo:tag"')
        for e in errors
    )
    assert any(
        e.startswith('spec.images.runtime.imagePullPolicy: Unsupported value: "Sometimes"')
        for e in errors
    )
    assert len(errors) == 2
    for good in ("busybox", "localhost:5000/a/b:1", "ghcr.io/x/y@sha256:" + "a" * 64):
        assert set_errors(images={"exporter": {"image": good}}) == []
    assert set_errors(images={"exporter": {"imagePullPolicy": "Always"}}) == [
        "spec.images.exporter.image: Required value: an image override must name its image"
    ]


def test_every_failing_field_is_reported_together() -> None:
    errors = set_errors(
        minReplicas=-1,
        maxReplicas=2,
        minAvailableReplicas=3,
        scaleDownCooldown="1d",
        recycleStrategy="Never",
    )
    assert len(errors) == 4
    assert {e.split(":")[0] for e in errors} == {
        "spec.minReplicas",
        "spec.minAvailableReplicas",
        "spec.scaleDownCooldown",
        "spec.recycleStrategy",
    }


def test_wrong_types_are_reported_and_do_not_crash_the_checks() -> None:
    errors = set_errors(minReplicas="three", selector="pool=a", template=[], images="x")
    assert 'spec.minReplicas: Invalid value: "three": must be of type integer' in errors
    assert 'spec.selector: Invalid value: "pool=a": must be of type object' in errors
    assert errors_of("ExporterSet", {"kind": "ExporterSet", "spec": None}) == [
        "spec: Invalid value: null: must be of type object",
        "spec: Required value",
    ]


def test_immutable_fields_on_update() -> None:
    old = a_set()
    new = a_set(
        virtualTargetClassName="other",
        selector={"matchLabels": {"pool": "b"}},
        template={"metadata": {"labels": {"pool": "b"}}},
    )
    errors = errors_of("ExporterSet", new, old)
    assert 'spec.virtualTargetClassName: Invalid value: "other": field is immutable' in errors
    assert (
        'spec.selector: Invalid value: {"matchLabels":{"pool":"b"}}: field is immutable' in errors
    )
    assert errors_of("ExporterSet", a_set(minReplicas=2), old) == []
    assert errors_of("VirtualTargetClass", a_class(provisioner="other.example.com"), a_class()) == [
        'spec.provisioner: Invalid value: "other.example.com": field is immutable'
    ]


def test_class_provisioner_present_and_qualified() -> None:
    obj = a_class()
    del obj["spec"]["provisioner"]
    assert errors_of("VirtualTargetClass", obj) == ["spec.provisioner: Required value"]
    assert class_errors(provisioner="") == [
        "spec.provisioner: Required value: e.g. qemu.jumpstarter.dev"
    ]
    assert class_errors(provisioner="qemu jumpstarter")[0].startswith(
        'spec.provisioner: Invalid value: "qemu jumpstarter"'
    )
    assert class_errors(provisioner="example.com/qemu") == []


def test_class_enums() -> None:
    errors = class_errors(bindingMode="Later", reclaimPolicy="Keep")
    assert errors == [
        (
            'spec.bindingMode: Unsupported value: "Later": supported values: "Immediate", '
            '"WaitForFirstConsumer"'
        ),
        'spec.reclaimPolicy: Unsupported value: "Keep": supported values: "Delete", "Retain"',
    ]


def test_ca_bundle_reference_names_its_configmap() -> None:
    assert class_errors(caBundleConfigMapRef={"key": "ca.crt"}) == [
        "spec.caBundleConfigMapRef.name: Required value: the reference must name its ConfigMap"
    ]
    assert class_errors(caBundleConfigMapRef={"name": "corp-ca"}) == []


def test_tolerations() -> None:
    tolerations = [
        {"key": "gpu", "operator": "Exists", "value": "yes"},
        {"operator": "Equal", "value": "x"},
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoWay"},
        {"key": "k", "operator": "Maybe"},
        {"operator": "Exists"},
        {
            "key": "k",
            "operator": "Equal",
            "value": "v",
            "effect": "NoExecute",
            "tolerationSeconds": 30,
        },
    ]
    errors = class_errors(scheduling={"tolerations": tolerations})
    assert errors == [
        (
            'spec.scheduling.tolerations[0].value: Invalid value: "yes": must be empty when '
            "operator is Exists"
        ),
        (
            'spec.scheduling.tolerations[1].operator: Invalid value: "Equal": must be Exists when '
            "key is empty (a toleration that matches every taint)"
        ),
        (
            'spec.scheduling.tolerations[2].effect: Unsupported value: "NoWay": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"'
        ),
        (
            'spec.scheduling.tolerations[3].operator: Unsupported value: "Maybe": supported '
            'values: "Exists", "Equal"'
        ),
    ]


def test_toleration_seconds_without_no_execute_is_a_warning() -> None:
    obj = a_class(
        scheduling={
            "tolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
            ]
        }
    )
    verdict = validate_object("VirtualTargetClass", obj, schema_source)
    assert verdict.errors == []
    assert verdict.warnings == [
        "spec.scheduling.tolerations[0].tolerationSeconds is ignored unless effect is NoExecute"
    ]


def test_node_selector_label_syntax() -> None:
    errors = class_errors(
        scheduling={"nodeSelector": {"kubernetes.io/arch": "amd64", "-bad": "x", "ok": "no way"}}
    )
    assert len(errors) == 2
    assert errors[0].startswith('spec.scheduling.nodeSelector: Invalid value: "-bad"')
    assert errors[1].startswith('spec.scheduling.nodeSelector.ok: Invalid value: "no way"')


def test_resource_quantities_parse_and_requests_within_limits() -> None:
    resources = {
        "requests": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "lots"},
        "limits": {"cpu": "1500m", "memory": "2Gi"},
    }
    errors = class_errors(scheduling={"resources": resources})
    assert len(errors) == 2
    assert errors[0].startswith(
        'spec.scheduling.resources.requests.ephemeral-storage: Invalid value: "lots"'
    )
    assert errors[1] == (
        'spec.scheduling.resources.requests.cpu: Invalid value: "2": must be less than or '
        "equal to cpu limit of 1500m"
    )
    assert (
        class_errors(
            scheduling={"resources": {"requests": {"memory": "512Mi"}, "limits": {"memory": "1Gi"}}}
        )
        == []
    )


def test_label_maps_remembered_as_valid_still_report_every_invalid_entry() -> None:
    from api.labels import labels_errors

    assert labels_errors({"pool": "a", "example.com/board": "qemu"}, "m") == []
    assert labels_errors({"pool": "a", "example.com/board": "qemu"}, "m") == []  # remembered
    # Values equal to a valid map's as tuples (1 == True) but not strings stay invalid.
    for value in (1, True, 1.0, ["a"], {"a": "b"}):
        assert [str(e) for e in labels_errors({"pool": value}, "m")] == [
            f"m.pool: Invalid value: {json.dumps(value, separators=(',', ':'))}: must be a string"
        ]
    errors = [str(e) for e in labels_errors({"-bad": "ok", "good": "-bad"}, "m")]
    assert len(errors) == 2 and errors[0].startswith('m: Invalid value: "-bad"')


def test_warm_buffer_annotations_are_checked_with_clear_messages() -> None:
    def with_annotations(**annotations: str) -> list[str]:
        obj = a_set()
        obj["metadata"]["annotations"] = {
            f"virtualtarget.jumpstarter.dev/{k.replace('_', '-')}": v
            for k, v in annotations.items()
        }
        return errors_of("ExporterSet", obj)

    assert with_annotations(warm_buffer="auto", target_lease_wait="30s") == []
    assert with_annotations(boot_estimate="90s", demand_window="15m") == []
    assert with_annotations(warm_buffer="on") == [
        "metadata.annotations[virtualtarget.jumpstarter.dev/warm-buffer]: Invalid value: "
        '"on": must be "auto" (or absent: minAvailableReplicas)'
    ]
    assert with_annotations(target_lease_wait="-5s") == [
        "metadata.annotations[virtualtarget.jumpstarter.dev/target-lease-wait]: Invalid value: "
        '"-5s": must not be negative'
    ]
    assert with_annotations(boot_estimate="0s") == [
        "metadata.annotations[virtualtarget.jumpstarter.dev/boot-estimate]: Invalid value: "
        '"0s": must be greater than 0'
    ]
    wrong = with_annotations(target_lease_wait="half a minute", demand_window="0s")
    assert len(wrong) == 2 and "invalid duration" in wrong[0]


def test_a_bad_warm_buffer_annotation_already_stored_does_not_block_other_updates() -> None:
    key = "virtualtarget.jumpstarter.dev/target-lease-wait"
    stored = a_set()
    stored["metadata"]["annotations"] = {key: "soon"}
    edited = json.loads(json.dumps(stored))
    edited["metadata"]["annotations"]["virtualtarget.jumpstarter.dev/backoff"] = "{}"
    assert errors_of("ExporterSet", edited, stored) == []  # e.g. the pool's memory write
    edited["metadata"]["annotations"][key] = "later"
    assert errors_of("ExporterSet", edited, stored) == [
        f"metadata.annotations[{key}]: Invalid value: \"later\": invalid duration 'later': "
        "expected a number followed by one of ns, us, ms, s, m, h"
    ]
