"""docs/install.md's commands name what the code uses, its steps render, and its uninstall
goes in the order it explains (the node tier runs them: tests/node/test_install.py); so do
the node install's blocks docs/development.md holds (`page_of`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from harness.cluster import DEFAULT_WORKDIR
from harness.deploy_render import DEPLOY, OVERLAYS, REPO, kubectl
from harness.images import product_image
from harness.jumpstarter_images import MAIN_IMAGES, RELEASE_IMAGES
from harness.jumpstarter_operator import OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE
from harness.release import IMAGES, PRODUCT_REPOSITORY
from pool.model.keys import LEASE_PROTECTION, SET_LABEL
from tests.docpages import commands
from tests.dropin import ACCOUNT, PROVISIONER
from tests.installpage import (
    EXAMPLES_APPLY,
    EXAMPLES_DELETE,
    INSTALL_CERT_MANAGER,
    INSTALL_SELF_SIGNED,
    INSTALL_WITHOUT_JUMPSTARTER,
    NODE_INSTALL,
    NODE_JUMPSTARTER,
    NODE_MAIN_OPERATOR,
    NODE_MAIN_OPERATOR_DISABLE,
    NODE_POOL,
    PAGE,
    UNINSTALL,
    UNINSTALL_LEASED,
    documented_certs_run,
    page_of,
    words,
)
from virtualtarget.cli import main

EXAMPLES = REPO / "examples"
OPERATOR_FOLDER = ".run/jumpstarter-operator"  # where the page writes the operator's manifests


def _words(name: str) -> list[list[str]]:
    return [words(c) for c in commands(page_of(name), name)]


def _applied(name: str) -> list[str]:
    return [w[-1] for w in _words(name) if w[:3] == ["kubectl", "apply", "-k"]]


def test_each_shipped_overlay_is_installed_by_one_documented_command() -> None:
    installs = (INSTALL_SELF_SIGNED, INSTALL_CERT_MANAGER, INSTALL_WITHOUT_JUMPSTARTER)
    applied = [target for name in installs for target in _applied(name)]
    assert sorted(applied) == sorted(f"deploy/overlays/{name}" for name in OVERLAYS)
    # On the node, beside Jumpstarter's operator, the overlay for a cluster with Jumpstarter.
    # (from a copy of the release's kustomize/ folder).
    assert _applied(NODE_INSTALL) == [".run/release/deploy/overlays/self-signed"]
    # Each waits for the webhook before anything is admitted.
    for name in (*installs, NODE_INSTALL):
        assert [
            "kubectl", "-n", "virtualtarget-system", "rollout", "status",
            "deployment/virtualtarget-webhook",
        ] in _words(name)  # fmt: skip
    for name in installs:
        assert _words(name)[-1] == [
            "kubectl", "-n", "virtualtarget-system", "rollout", "status",
            "deployment/virtualtarget-webhook",
        ]  # fmt: skip


def test_documented_self_signed_steps_render(tmp_path: Path) -> None:
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    shutil.copytree(REPO / "crds", tmp_path / "crds")
    _, host, target, args = documented_certs_run()
    assert host == "deploy/overlays/self-signed" and args[0] == "certs"
    overlay = tmp_path / host
    # The container's paths are the mounted overlay's.
    assert main([a.replace(target, str(overlay)) for a in args]) == 0

    for name in ("self-signed", "self-signed-exporter-crd"):
        done = subprocess.run(
            [kubectl(), "kustomize", tmp_path / "deploy" / "overlays" / name],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        kinds = {o["kind"] for o in yaml.safe_load_all(done.stdout) if o}
        assert {"Secret", "MutatingWebhookConfiguration", "Deployment"} <= kinds


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_the_node_install_commands_name_what_the_code_uses() -> None:
    node = _words(NODE_INSTALL)
    socket = _relative(DEFAULT_WORKDIR / "containerd" / "containerd.sock")
    # The release of this tree (harness.release): its product archive, named by digest too.
    assert node[0] == ["make", "release"]
    assert node[1][:2] == ["export", "RELEASE=$PWD/dist/$(sed"]
    product = f"$RELEASE/images/{IMAGES[0][0]}.oci.tar"
    assert node[2] == ["ctr", "--address", socket, "-n", "k8s.io", "images", "import",
                       "--digests", "--base-name", PRODUCT_REPOSITORY, product]  # fmt: skip
    # The Jumpstarter block sets the shell the product's block runs in.
    jumpstarter = _words(NODE_JUMPSTARTER)
    kubeconfig = f"KUBECONFIG=$PWD/{_relative(DEFAULT_WORKDIR)}/kubeconfig"
    assert ["export", kubeconfig, "PATH=$PWD/.bin:$PATH"] in jumpstarter
    assert ["make", "jumpstarter-controller-images"] in jumpstarter
    for image in RELEASE_IMAGES:
        assert ["ctr", "--address", socket, "-n", "k8s.io", "images", "import",
                _relative(image.archive())] in jumpstarter  # fmt: skip
    assert [".venv/bin/python", "-m", "harness.jumpstarter_operator", "--out",
            OPERATOR_FOLDER] in jumpstarter  # fmt: skip
    assert ["kubectl", "apply", "-k", OPERATOR_FOLDER] in jumpstarter
    assert ["kubectl", "-n", OPERATOR_NAMESPACE, "rollout", "status",
            f"deployment/{OPERATOR_DEPLOYMENT}"] in jumpstarter  # fmt: skip
    assert _words(NODE_POOL) == [["kubectl", "apply", "-f", "examples/node/pool/"]]
    # The documented `docker run ... certs`, with the overlay's own path for the mount's.
    _, host, target, documented = documented_certs_run()
    copy = f".run/release/{host}"  # the copy of the release's kustomize/ folder
    assert [".venv/bin/virtualtarget", *(a.replace(target, copy) for a in documented)] in node


def test_the_main_operator_commands_name_what_the_code_uses() -> None:
    main = _words(NODE_MAIN_OPERATOR)
    socket = _relative(DEFAULT_WORKDIR / "containerd" / "containerd.sock")
    # Main's images from .cache, this product's from its release (harness.release's names).
    archives = [_relative(i.archive()) for i in MAIN_IMAGES]
    archives += [f"$RELEASE/images/{name}.oci.tar" for name, _ in IMAGES[:2]]
    imports = [c[-1] for c in main if c[:2] == ["ctr", "--address"]]
    assert sorted(imports) == sorted(archives)
    assert main[0] == ["make", "jumpstarter-controller-images"] and ["make", "release"] in main
    assert all(c[:2] != ["ctr", "--address"] or c[2:7] == [socket, "-n", "k8s.io", "images",
               "import"] for c in main)  # fmt: skip
    assert [".venv/bin/python", "-m", "harness.jumpstarter_operator", "--main", "--out",
            ".run/jumpstarter-main-operator"] in main  # fmt: skip
    assert any(f"deployment/{ACCOUNT}" in command for command in main)
    assert main[-1] == ["kubectl", "apply", "-f", "examples/node/pool/"]
    resource = yaml.safe_load((EXAMPLES / "node" / "jumpstarter-main.yaml").read_text())
    # the provisioner the disable block turns off: the resource's first, this product's image
    assert resource["spec"]["exporterSets"]["provisioners"] == [
        {"name": PROVISIONER, "image": product_image()}
    ]
    (disable,) = _words(NODE_MAIN_OPERATOR_DISABLE)
    assert disable[:6] == [
        "kubectl",
        "-n",
        "jumpstarter-lab",
        "patch",
        "jumpstarter",
        "jumpstarter",
    ]
    assert "/spec/exporterSets/provisioners/0/enabled" in disable[-1]


def test_the_examples_are_applied_and_deleted_by_one_command_each() -> None:
    assert _words(EXAMPLES_APPLY) == [["kubectl", "apply", "-f", "examples/"]]
    assert _words(EXAMPLES_DELETE) == [["kubectl", "delete", "-f", "examples/"]]


def test_in_name_order_each_set_comes_before_the_class_it_names() -> None:
    """kubectl takes a folder's files in name order; the webhook refuses to delete a class
    that a set still uses, so `kubectl delete -f examples/` must meet the set first."""
    documents = [
        d for path in sorted(EXAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text())
    ]
    order = [(d["kind"], d["metadata"]["name"]) for d in documents if d]
    sets = [d for d in documents if d and d["kind"] == "ExporterSet"]
    assert sets
    for exporter_set in sets:
        named = ("VirtualTargetClass", exporter_set["spec"]["virtualTargetClassName"])
        assert order.index(("ExporterSet", exporter_set["metadata"]["name"])) < order.index(named)


def test_uninstall_takes_sets_then_classes_then_the_overlay() -> None:
    steps = _words(UNINSTALL)
    assert steps == [
        ["kubectl", "delete", "exportersets", "--all", "--all-namespaces"],
        ["kubectl", "delete", "virtualtargetclasses", "--all", "--all-namespaces"],
        ["kubectl", "delete", "-k", "deploy/overlays/self-signed", "--ignore-not-found"],
    ]


# The label Jumpstarter 0.9.0's lease controller puts on an ended Lease
# (api/v1alpha1/lease_types.go: LeaseLabelEnded).
LEASE_ENDED_LABEL = "jumpstarter.dev/lease-ended"


def test_the_leased_instances_step_names_the_set_label_the_finalizer_and_ended_leases() -> None:
    """The last uninstall step finds this product's Exporters by its set label, waits while
    a Lease without Jumpstarter's ended label names one, and takes off the finalizer the
    pool adds, by a patch that fails for any other first finalizer."""
    (step,) = commands(PAGE, UNINSTALL_LEASED)
    text = step.text
    assert f"get exporters -A -l {SET_LABEL} " in text
    assert f"-l '!{LEASE_ENDED_LABEL}'" in text
    assert f'"op": "test", "path": "/metadata/finalizers/0", "value": "{LEASE_PROTECTION}"' in text
    assert text.index("until [") < text.index("patch exporter")
