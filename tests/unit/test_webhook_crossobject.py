"""Cross-object checks: the set against its class, deleting a class in use, no cluster."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Mapping
from typing import Any

from api.provisioners.check import check_parameters
from tests.unit.test_webhook_support import a_class, a_set, review, schema_source
from webhook.admission import CROSS_OBJECT_SKIPPED, Admission
from webhook.clusterview import ClusterUnavailable, StaticView
from webhook.crossobject import check_set_against_class
from webhook.decode import decode_review
from webhook.envelope import Outcome
from webhook.routes import ENDPOINTS, Role

VALIDATE = {(e.kind.kind, e.role): e for e in ENDPOINTS}


def run(admission: Admission, review: dict[str, Any], budget: float = 1.0) -> Outcome:
    request = decode_review(json.dumps(review).encode())
    endpoint = VALIDATE[(request.kind, Role.VALIDATE)]
    return asyncio.run(admission.review(endpoint, request, budget))


def validate(objects: list[dict[str, Any]], obj: dict[str, Any], **kw: Any) -> Outcome:
    return run(Admission(schema_source, StaticView(objects)), review(obj, **kw))


def test_missing_class_is_a_warning_not_a_denial() -> None:
    outcome = validate([], a_set())
    assert outcome.allowed
    assert outcome.warnings == [
        'VirtualTargetClass "qemu" not found in namespace "lab"; no instances are created '
        "until it exists"
    ]


def test_class_in_another_namespace_is_not_found() -> None:
    other = a_class()
    other["metadata"]["namespace"] = "elsewhere"
    assert validate([other], a_set()).warnings


def test_wait_for_first_consumer_contradicts_a_warm_buffer() -> None:
    cls = a_class(bindingMode="WaitForFirstConsumer")
    outcome = validate([cls], a_set(minAvailableReplicas=2))
    assert [str(e) for e in outcome.errors] == [
        'spec.minAvailableReplicas: Invalid value: 2: must be 0: VirtualTargetClass "qemu" has '
        "bindingMode WaitForFirstConsumer, which keeps no warm instances"
    ]
    assert validate([cls], a_set(minAvailableReplicas=0)).allowed
    assert validate([a_class()], a_set(minAvailableReplicas=2)).allowed


def test_auto_warm_buffer_under_wait_for_first_consumer_is_a_warning() -> None:
    auto = a_set(minAvailableReplicas=0)
    auto["metadata"]["annotations"] = {"virtualtarget.jumpstarter.dev/warm-buffer": "auto"}
    outcome = validate([a_class(bindingMode="WaitForFirstConsumer")], auto)
    assert outcome.allowed
    assert outcome.warnings == [
        'virtualtarget.jumpstarter.dev/warm-buffer: auto has no effect: class "qemu" binds '
        "WaitForFirstConsumer, keeps none warm"
    ]
    assert validate([a_class()], auto).warnings == []
    lazy = validate([a_class(bindingMode="WaitForFirstConsumer")], a_set(minAvailableReplicas=0))
    assert lazy.warnings == []


def test_merged_parameters_are_checked_against_the_qemu_model() -> None:
    cls = a_class(parameters={"arch": "aarch64", "resources": {"cpu": 4, "memory": "4Gi"}})
    assert validate([cls], a_set(parameters={"resources": {"cpu": 8}})).allowed
    outcome = validate(
        [cls], a_set(parameters={"resources": {"cpu": 0, "memory": "1k"}, "firmware": "uefi"})
    )
    texts = [str(e) for e in outcome.errors]
    assert texts[0].startswith('spec.parameters.firmware: Invalid value: "uefi": Input should be')
    assert texts[1].startswith(
        "spec.parameters.resources.cpu: Invalid value: 0: Input should be greater"
    )
    assert texts[2].startswith(
        'spec.parameters.resources.memory: Invalid value: "1k": must be a whole number of KiB'
    )
    assert all(t.endswith("(qemu.jumpstarter.dev, class and set parameters merged)") for t in texts)


def test_jumpstarter_shaped_manifests_are_admitted() -> None:
    """The class and set JEP-0014 publishes: machineType, firmware.url, resources."""
    cls = a_class(
        parameters={
            "machineType": "virt",
            "firmware": {"url": "registry.example.com/firmware/rpi4:latest"},
            "resources": {"cpu": 4, "memory": "4Gi"},
            "storage": {"size": "16Gi"},
        }
    )
    outcome = validate([cls], a_set(parameters={"resources": {"memory": "8Gi"}}))
    assert outcome.allowed and outcome.warnings == []


def test_unknown_keys_of_the_set_are_warnings_naming_the_known_keys() -> None:
    cls = a_class(parameters={"colour": "red"})  # the class's own: warned at its admission
    outcome = validate([cls], a_set(parameters={"typo": 1, "resources": {"gpus": 1}}))
    assert outcome.allowed
    assert outcome.warnings == [
        "spec.parameters.typo: unknown parameter, passed through "
        "(known: arch, machineType, firmware, resources, storage, layout)",
        "spec.parameters.resources.gpus: unknown parameter, passed through "
        "(known: cpu, memory, storage)",
    ]


def test_bad_cpu_and_digest_are_denied_with_their_paths() -> None:
    outcome = validate(
        [a_class()],
        a_set(parameters={"resources": {"cpu": "4"}, "firmware": {"digest": "sha256:abc"}}),
    )
    assert [e.field for e in outcome.errors] == [
        "spec.parameters.firmware.digest",
        "spec.parameters.resources.cpu",
    ]


def test_a_class_is_checked_with_its_own_parameters() -> None:
    outcome = validate([], a_class(parameters={"arch": "riscv64", "colour": "red"}))
    assert [str(e) for e in outcome.errors] == [
        "spec.parameters.arch: Invalid value: \"riscv64\": Input should be 'x86_64' or "
        "'aarch64' (qemu.jumpstarter.dev)"
    ]
    # The last known key gives way to keep the warning within 120 characters.
    assert outcome.warnings == [
        "spec.parameters.colour: unknown parameter, passed through "
        "(known: arch, machineType, firmware, resources, storage, …)"
    ]


def test_long_unknown_paths_are_cut_to_the_warning_limit() -> None:
    warnings = check_parameters("qemu.jumpstarter.dev", {"x" * 300: 1}).warnings
    assert len(warnings[0]) == 120 and "…" in warnings[0].split(": unknown")[0]
    assert warnings[0].endswith(": unknown parameter, passed through (known: arch, …)")


def test_parameter_verdicts_follow_the_class_version_and_the_set_parameters() -> None:
    def versioned(version: str, cpu: Any) -> dict[str, Any]:
        cls = a_class(parameters={"resources": {"cpu": cpu}})
        cls["metadata"].update(uid="6a1e", resourceVersion=version)
        return cls

    old = versioned("1", 4)
    assert validate([old], a_set()).allowed
    assert validate([old], a_set()).allowed  # remembered
    # The class changed (a new resourceVersion): its new parameters are checked.
    assert not validate([versioned("2", 0)], a_set()).allowed
    # Equal as Python values, different as JSON: each set gets its own verdict.
    assert validate([old], a_set(parameters={"resources": {"cpu": 2}})).allowed
    assert not validate([old], a_set(parameters={"resources": {"cpu": True}})).allowed
    assert not validate([old], a_set(parameters={"resources": {"cpu": 2.0}})).allowed


def test_parameters_json_cannot_spell_are_still_checked() -> None:
    qemu = "qemu.jumpstarter.dev"
    dated = check_parameters(qemu, {"firmware": {"url": datetime.date(2026, 1, 1)}}).errors
    assert [e.field for e in dated] == ["spec.parameters.firmware.url"]
    cls = a_class()
    cls["metadata"].update(uid="6a1e", resourceVersion="7")
    dated_set = a_set(parameters={"firmware": {"url": datetime.date(2026, 1, 1)}})
    verdict = asyncio.run(check_set_against_class(dated_set, "lab", StaticView([cls]), 1.0))
    assert [e.field for e in verdict.errors] == ["spec.parameters.firmware.url"]


def test_the_set_wins_over_the_class_in_the_merge() -> None:
    cls = a_class(parameters={"arch": "sparc"})
    assert not validate([cls], a_set()).allowed
    assert validate([cls], a_set(parameters={"arch": "aarch64"})).allowed


def test_unknown_provisioners_parameters_are_not_checked() -> None:
    cls = a_class(provisioner="corellium.jumpstarter.dev", parameters={"anything": [1]})
    assert validate([cls], a_set()).allowed


def test_deleting_a_class_in_use_is_denied_listing_the_sets() -> None:
    second = a_set()
    second["metadata"]["name"] = "pool-b"
    elsewhere = a_set()
    elsewhere["metadata"]["namespace"] = "other"
    outcome = validate([a_set(), second, elsewhere], None, old=a_class(), operation="DELETE")
    assert outcome.message == ""
    assert [str(e) for e in outcome.errors] == [
        "metadata.name: Forbidden: VirtualTargetClass is in use by ExporterSets pool-a, pool-b; "
        "delete or move them first"
    ]
    assert validate([elsewhere], None, old=a_class(), operation="DELETE").allowed


class Unreachable:
    """A view whose apiserver refuses connections."""

    async def get_class(self, namespace: str, name: str, budget: float) -> Mapping[str, Any] | None:
        raise ClusterUnavailable("connection refused by the apiserver")

    async def sets_using_class(self, namespace: str, name: str, budget: float) -> list[str]:
        return []


def test_unreachable_cluster_denies_with_a_retryable_message() -> None:
    outcome = run(Admission(schema_source, Unreachable()), review(a_set()))
    assert outcome.code == 503
    assert "connection refused" in outcome.message and "retry" in outcome.message


def test_single_object_errors_still_reported_when_the_cluster_is_unreachable() -> None:
    outcome = run(Admission(schema_source, Unreachable()), review(a_set(minReplicas=-1)))
    assert outcome.code == 422 and len(outcome.errors) == 1
    assert any("cross-object checks skipped" in w for w in outcome.warnings)


def test_without_a_cluster_single_object_checks_run_and_one_warning_says_so() -> None:
    admission = Admission(schema_source, None)
    outcome = run(admission, review(a_set()))
    assert outcome.allowed and outcome.warnings == [CROSS_OBJECT_SKIPPED]
    assert not run(admission, review(a_set(minReplicas=-2))).allowed
    deleted = run(admission, review(None, old=a_class(), operation="DELETE"))
    assert deleted.allowed and deleted.warnings == [CROSS_OBJECT_SKIPPED]


def _kubevirt_class() -> dict[str, Any]:
    return a_class(
        provisioner="kubevirt.jumpstarter.dev",
        credentialsSecretRef={"name": "kubevirt-credentials"},
        parameters={"namespace": "vms", "image": "quay.io/containerdisks/fedora:latest"},
    )


def test_a_kubevirt_class_is_admitted_whatever_its_secret_holds() -> None:
    """The webhook reads no Secret: a missing or keyless credentials Secret is the
    reconciler's to report (`Degraded` `TargetFailed`), not admission's."""
    keyless = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kubevirt-credentials", "namespace": "lab"},
        "data": {"token": "eA=="},
    }
    for objects in ([], [keyless]):
        outcome = validate(objects, _kubevirt_class())
        assert (outcome.allowed, outcome.warnings) == (True, [])
