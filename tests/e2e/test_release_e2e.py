"""`make release` of the working tree's version, checked as a platform team would check
it: the sums, the digests the manifests name against the archives beside them, the
manifests against a real kube-apiserver (`--dry-run=server`), and the archives loaded by
podman and by a containerd of their own.

The images are those `make image` built (`harness.images`: kept while their inputs are
unchanged), so this costs the archives' conversion, not a build."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.controlplane import ControlPlane
from harness.images import build_kubevirt_exporter, build_product, build_qemu_exporter
from harness.ociarchive import manifest_digest
from harness.release import PRODUCT_REPOSITORY, REPO, build_release, source_of, tree_version

pytestmark = [pytest.mark.e2e, pytest.mark.image, pytest.mark.timeout(900)]

CERT_MANAGER_KINDS = {"Certificate", "Issuer"}  # served only where cert-manager runs
SELF_SIGNED = "kustomize/deploy/overlays/self-signed"


@pytest.fixture(scope="module")
def release() -> Path:
    """`make release` of the working tree (into `dist/`, shared with the node tier's
    install; built once for the same inputs)."""
    for build in (build_product, build_qemu_exporter, build_kubevirt_exporter):
        build()
    return build_release(source_of(None), build=False)


@pytest.fixture(scope="module")
def images(release: Path) -> dict[str, dict[str, object]]:
    listing: dict[str, dict[str, object]] = json.loads((release / "images.json").read_text())[
        "images"
    ]
    return listing


def test_the_sums_hold_for_every_file(release: Path) -> None:
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=release, check=True)
    listed = {line.split("  ", 1)[1] for line in (release / "SHA256SUMS").read_text().splitlines()}
    files = {p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file()}
    assert listed == files - {"SHA256SUMS"}
    version = tree_version(REPO)
    assert (release / "CHANGELOG.md").read_text().startswith(f"## {version}")
    assert {"LICENSE", "manifests/crds.yaml", "manifests/cert-manager.yaml"} <= listed
    assert {
        f"sbom/{name}.cdx.json" for name in ("virtualtarget", "qemu-exporter", "kubevirt-exporter")
    } <= listed


def test_every_manifest_names_the_product_by_the_digest_of_its_archive(
    release: Path, images: dict[str, dict[str, object]]
) -> None:
    for name, entry in images.items():
        named = manifest_digest(release / str(entry["archive"]))
        assert set(named.values()) == {entry["digest"]}, name
        assert next(iter(named)).startswith("ghcr.io/jumpstarter-dev/virtualtarget")
    product = images["virtualtarget"]
    reference = f"{PRODUCT_REPOSITORY}:{tree_version(REPO)}@{product['digest']}"
    seen = 0
    for path in [
        *(release / "manifests").rglob("*.yaml"),
        *(release / "kustomize").rglob("*.yaml"),
    ]:
        text = path.read_text()
        seen += text.count(reference)
        assert text.count(f"{PRODUCT_REPOSITORY}:") == text.count(reference), path
    assert seen >= 4  # the webhook and reconciler, in the tree and in cert-manager.yaml


def test_each_sbom_names_the_image_and_its_python_packages(
    release: Path, images: dict[str, dict[str, object]]
) -> None:
    for name, entry in images.items():
        document = json.loads((release / "sbom" / f"{name}.cdx.json").read_text())
        assert document["metadata"]["component"]["bom-ref"].endswith(str(entry["digest"]))
        packages = {c["name"].lower() for c in document["components"]}
        wanted = {"virtualtarget", "pydantic"} if name == "virtualtarget" else {"jumpstarter"}
        assert wanted <= packages, name


def test_the_manifests_are_accepted_by_a_real_apiserver(
    release: Path, control_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = control_plane
    plane.kubectl("apply", "--dry-run=server", "-f", str(release / "manifests" / "crds.yaml"))
    # Namespaced objects need their namespace to exist, even in a dry run.
    plane.kubectl("create", "namespace", "virtualtarget-system", check=False)
    documents = [
        d
        for d in yaml.safe_load_all((release / "manifests" / "cert-manager.yaml").read_text())
        if d and d["kind"] not in CERT_MANAGER_KINDS
    ]
    plane.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(documents))
    # The self-signed route, as its page has it: certificates into the overlay, then -k.
    shutil.copytree(release / "kustomize", tmp_path / "kustomize")
    overlay = tmp_path / SELF_SIGNED
    subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "virtualtarget"),
            "certs",
            "--out",
            str(overlay / "certs"),
            "--service",
            "virtualtarget-webhook",
            "--namespace",
            "virtualtarget-system",
            "--kustomize-overlay",
            str(overlay),
        ],
        check=True,
        capture_output=True,
    )
    applied = plane.kubectl("apply", "--dry-run=server", "-k", str(overlay))
    assert "deployment.apps/virtualtarget-webhook created (server dry run)" in applied.stdout


def test_podman_loads_the_product_archive(
    release: Path, images: dict[str, dict[str, object]]
) -> None:
    # podman refuses a run folder of more than 50 characters: pytest's are longer.
    folder = Path(tempfile.mkdtemp(prefix="vt-podman-"))
    podman = ["podman", "--root", str(folder / "root"), "--runroot", str(folder / "run")]
    podman += ["--storage-driver", "overlay"]
    entry = images["virtualtarget"]
    subprocess.run(
        [*podman, "load", "-i", str(release / str(entry["archive"]))],
        check=True,
        capture_output=True,
    )
    listed = json.loads(
        subprocess.run(
            [*podman, "images", "--format", "json"], check=True, capture_output=True, text=True
        ).stdout
    )
    # Loaded as the OCI layout: the digest the manifests name is the one podman keeps.
    assert [(image["Names"], image["Digest"]) for image in listed] == [
        (entry["names"], entry["digest"])
    ]
    subprocess.run([*podman, "system", "reset", "--force"], capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def containerd(tmp_path: Path) -> Iterator[Path]:
    """A containerd of this test's own, its CRI plugin off: only its image store."""
    socket = tmp_path / "containerd.sock"
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 2\nroot = "{tmp_path / "root"}"\nstate = "{tmp_path / "state"}"\n'
        f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "{socket}"\n'
    )
    log = (tmp_path / "containerd.log").open("wb")
    process = subprocess.Popen(["containerd", "--config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while not socket.exists():
            assert process.poll() is None and time.monotonic() < deadline, (
                tmp_path / "containerd.log"
            ).read_text()
            time.sleep(0.1)
        yield socket
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_ctr_imports_the_product_archive_by_name_and_digest(
    release: Path, images: dict[str, dict[str, object]], containerd: Path
) -> None:
    ctr = ["ctr", "--address", str(containerd), "-n", "k8s.io"]
    entry = images["virtualtarget"]
    # As the install page has it: a second name by digest, which the manifests name.
    subprocess.run(
        [
            *ctr,
            "images",
            "import",
            "--no-unpack",
            "--digests",
            "--base-name",
            PRODUCT_REPOSITORY,
            str(release / str(entry["archive"])),
        ],
        check=True,
        capture_output=True,
    )
    listed = subprocess.run([*ctr, "images", "ls"], check=True, capture_output=True, text=True)
    rows = {line.split()[0]: line.split()[2] for line in listed.stdout.splitlines()[1:]}
    (name,) = entry["names"]  # type: ignore[misc]
    digest = str(entry["digest"])
    assert rows == {name: digest, f"{PRODUCT_REPOSITORY}@{digest}": digest}
