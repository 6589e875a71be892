"""The Jumpstarter release this product targets, in one place.

The provisioners' default image tags (`api.provisioners`) and the pinned test
dependencies (pyproject.toml) follow it; a unit test keeps them equal. How the
`jumpstarter.dev` CRDs this project ships differ from that release's is listed here too.
No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "CRD_DIFFERENCES_FROM_RELEASE",
    "JUMPSTARTER_RELEASE",
    "JUMPSTARTER_REPOSITORIES",
    "QEMU_DRIVER",
]

JUMPSTARTER_RELEASE = "0.9.0"
# Where Jumpstarter publishes its images: the default images live under it, and the
# shipped overlays' image allow-list names it (deploy/components/jumpstarter-images).
JUMPSTARTER_REPOSITORIES = "quay.io/jumpstarter-dev/"
# The class of the QEMU driver in the release's jumpstarter-driver-qemu package, as a
# template names it (`type`).
QEMU_DRIVER = "jumpstarter_driver_qemu.driver.Qemu"

_MAIN = "Jumpstarter main at b1f2bb41 (jumpstarter-main-b1f2bb4-controller.tar.gz)"
_DOCUMENT = "ours only: schemas/exporter.txt, the Exporter reference our CRD is generated from"
_NOT_UPSTREAM = (
    f"in neither release {JUMPSTARTER_RELEASE} nor {_MAIN}, whose Exporter CRD is the release's"
)

# Every difference between a `jumpstarter.dev` CRD this project ships (crds/jumpstarter/,
# generated from schemas/ by `make crds`) and release JUMPSTARTER_RELEASE's, by kind,
# descriptions' wording aside, and where each side's comes from. Keys as tests/crddiff.py
# makes them (`<version> <field>`: a field one side lacks; `<version> <field> <keyword>`).
# tests/unit/test_release_crds.py fails on any difference not listed, and on a listed
# one that is gone. docs/design.md §7 says what each means on a release install.
CRD_DIFFERENCES_FROM_RELEASE: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "Exporter": MappingProxyType(
            {
                "names.categories": "ours only: `jumpstarter` (schemas/overlay.yaml)",
                "v1alpha1 additionalPrinterColumns": (
                    "ours Enabled, Status, Lease, Age (schemas/overlay.yaml); the "
                    "release's Enabled, Status, Message (priority 1)"
                ),
                "v1alpha1 status.conditions x-kubernetes-list-type": (
                    "ours `map` (schemas/overlay.yaml); the release's list is atomic"
                ),
                "v1alpha1 status.conditions x-kubernetes-list-map-keys": (
                    "ours [type] (schemas/overlay.yaml); the release's none"
                ),
                "v1alpha1 status.credential x-kubernetes-map-type": (
                    "the release's `atomic` (corev1.LocalObjectReference); ours none"
                ),
                "v1alpha1 status.leaseRef x-kubernetes-map-type": (
                    "the release's `atomic` (corev1.LocalObjectReference); ours none"
                ),
                "v1alpha1 status.lastSeen format": (
                    "the release's `date-time` (metav1.Time); ours none: the document says string"
                ),
                "v1alpha1 status.leaseHooks": f"{_DOCUMENT}; {_NOT_UPSTREAM}",
                "v1alpha1 status.recordsLeaseHooks": f"{_DOCUMENT}; {_NOT_UPSTREAM}",
                "v1alpha1 status.tokenExpiresAt": (
                    f"{_DOCUMENT}; on Exporter {_NOT_UPSTREAM}; {_MAIN} has it on "
                    "Client's status (api/v1alpha1/client_types.go), the release on "
                    "no kind"
                ),
            }
        ),
    }
)
