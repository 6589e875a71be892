"""The webhook alone (overlays/webhook-self-signed), beside Jumpstarter main's operator: the
operator installs the CRDs and runs this product's image as its exporter-set controller, so
the overlay brings neither; the webhook keeps all it has in the self-signed overlay."""

from __future__ import annotations

from harness.deploy_render import WEBHOOK_CONFIGURATION_KINDS, WEBHOOK_ONLY_OVERLAY, render_overlay

CERTIFIED = {"Secret", *WEBHOOK_CONFIGURATION_KINDS}


def _names(objects: list[dict]) -> set[tuple[str, str]]:  # type: ignore[type-arg]
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


def test_the_webhook_alone_is_the_self_signed_overlay_less_the_crds_and_the_reconciler() -> None:
    whole, alone = render_overlay("self-signed"), render_overlay(WEBHOOK_ONLY_OVERLAY)
    gone = _names(whole) - _names(alone)
    assert _names(alone) < _names(whole)
    assert {kind for kind, _ in gone} == {
        "CustomResourceDefinition", "Deployment", "PodDisruptionBudget", "Service",
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
    }  # fmt: skip
    assert all("reconciler" in name for kind, name in gone if kind != "CustomResourceDefinition")
    assert not any("reconciler" in name for _, name in _names(alone))
    # What stays is the self-signed overlay's, object for object (but the certificates and
    # the CA bundles, which each rendering makes anew).
    kept = {(o["kind"], o["metadata"]["name"]): o for o in whole}
    for obj in alone:
        if obj["kind"] not in CERTIFIED:
            assert obj == kept[(obj["kind"], obj["metadata"]["name"])]


def test_the_webhook_alone_reads_no_secret() -> None:
    roles = [o for o in render_overlay(WEBHOOK_ONLY_OVERLAY) if o["kind"] == "ClusterRole"]
    for role in roles:
        for rule in role.get("rules", []):
            assert "secrets" not in rule.get("resources", []), role["metadata"]["name"]
