"""The `jumpstarter.dev` CRDs this project ships against Jumpstarter release 0.9.0's own,
field by field (`tests.crddiff`: the whole spec, every version's openAPIV3Schema,
descriptions' wording aside).

Every difference must be listed, with where it comes from, in
`api.jumpstarter.CRD_DIFFERENCES_FROM_RELEASE`; one that is not fails naming its path, and
a listed one that is gone fails too. The release's CRDs are read from its source tarball
(`harness.jumpstarter_crds`), the files `make jumpstarter` copies beside its build. The
fields only ours has are pruned by the release's CRD: an Exporter stored by a release
install reads as those fields' defaults (the end-to-end side:
tests/e2e/test_release_crds_e2e.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from api.jumpstarter import CRD_DIFFERENCES_FROM_RELEASE
from harness.jumpstarter_build import MAIN_SOURCE, source_tarball
from harness.jumpstarter_crds import crd_in, release_crd
from pool.model.access import ACCESS as RECONCILER_ACCESS
from pool.model.adapt import exporter_view
from pool.rules.buckets import Bucket, classify, is_busy
from tests.crddiff import differences, only_ours
from webhook.access import ACCESS as WEBHOOK_ACCESS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "crds").rglob("jumpstarter.dev_*.yaml"))
TABLE = "api.jumpstarter.CRD_DIFFERENCES_FROM_RELEASE"


def _ours(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def _kind(path: Path) -> str:
    return str(_ours(path)["spec"]["names"]["kind"])


def test_every_shipped_jumpstarter_dev_crd_is_compared() -> None:
    assert [p.relative_to(ROOT).as_posix() for p in SHIPPED] == [
        "crds/jumpstarter/jumpstarter.dev_exporters.yaml"
    ]
    assert sorted(CRD_DIFFERENCES_FROM_RELEASE) == sorted(_kind(p) for p in SHIPPED)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_crd_differs_from_the_releases_only_as_listed(path: Path) -> None:
    found = differences(_ours(path), release_crd(path.name))
    listed = CRD_DIFFERENCES_FROM_RELEASE.get(_kind(path), {})
    unlisted = [f"{key}: ours {o!r}, the release's {r!r}" for key, (o, r) in found.items()
                if key not in listed]  # fmt: skip
    assert not unlisted, f"{path.name}: not in {TABLE}:\n" + "\n".join(unlisted)
    gone = sorted(set(listed) - set(found))
    assert not gone, f"{path.name}: listed in {TABLE}, no longer a difference: {gone}"


def test_main_at_b1f2bb41_has_the_releases_exporter_and_token_expiry_on_client() -> None:
    """What the table says of Jumpstarter main at b1f2bb41: its Exporter CRD is the
    release's (so what only ours has is in neither), and `tokenExpiresAt` is a field of
    its Client's status, new since the release."""
    main = source_tarball(MAIN_SOURCE)
    exporters, clients = "jumpstarter.dev_exporters.yaml", "jumpstarter.dev_clients.yaml"
    assert differences(crd_in(main, exporters), release_crd(exporters)) == {}
    assert "status.tokenExpiresAt" in only_ours(crd_in(main, clients), release_crd(clients))


def _only_ours() -> list[str]:
    """The Exporter status fields only our CRD has, as the comparison finds them."""
    fields = only_ours(_ours(SHIPPED[0]), release_crd(SHIPPED[0].name))
    assert fields == ["status.leaseHooks", "status.recordsLeaseHooks", "status.tokenExpiresAt"]
    return [f.removeprefix("status.") for f in fields]


def test_neither_component_may_write_an_exporters_status() -> None:
    """So neither writes a field the release's CRD would prune: their access tables (every
    API call is checked against them; the RBAC is generated from them) grant nothing on
    `exporters/status`, and the Exporter webhooks see `exporters` only, never its status."""
    granted = [p.resource for p in (*RECONCILER_ACCESS, *WEBHOOK_ACCESS)]
    assert "exporters" in granted and "exporters/status" not in granted
    hooks = yaml.safe_load_all((ROOT / "deploy/base/webhook-configurations.yaml").read_text())
    rules = [r for d in hooks for w in d["webhooks"] for r in w["rules"]
             if "jumpstarter.dev" in r["apiGroups"]]  # fmt: skip
    assert rules and all(r["resources"] == ["exporters"] for r in rules)


def test_an_exporter_a_release_install_stores_reads_as_the_fields_defaults() -> None:
    """An exporter that owes its afterLease hook, as our CRD stores it, is busy; the same
    status as the release's CRD stores it (those fields pruned) is an available one."""
    status = {
        "conditions": [{"type": t, "status": "True"} for t in ("Registered", "Online")],
        "exporterStatus": "Available",
        "leaseHooks": {"leaseRef": {"name": "l1"}, "leaseUID": "u1",
                       "beforeLease": {"phase": "Succeeded"}},
        "recordsLeaseHooks": True,
        "tokenExpiresAt": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    ours = {"metadata": {"name": "pool-a"}, "status": status}
    pruned = {**ours, "status": {k: v for k, v in status.items() if k not in _only_ours()}}
    recorded, stored = exporter_view(ours), exporter_view(pruned)
    assert is_busy(recorded, ()) and not is_busy(stored, ())
    assert (stored.records_lease_hooks, stored.hooks) == (False, None)
    assert classify(stored, (), (), "ExitAndReplace", True) is Bucket.AVAILABLE
