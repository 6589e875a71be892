"""`harness.jumpstarter_images` against release 0.9.0's own sources, without a build: the
names the images are tagged with are the ones the release's manifests and operator run
them by, and each image is its Containerfile's final stage, running the programs the
manifests run."""

from __future__ import annotations

import posixpath
import re

import pytest
import yaml

from harness.jumpstarter_build import MAIN_SOURCE, RELEASE_SOURCE, source_tarball
from harness.jumpstarter_crds import crd_in
from harness.jumpstarter_images import (
    CONTROLLER,
    CONTROLLER_IMAGE,
    IMAGES,
    MAIN_EXPORTERSET_CONTROLLER,
    MAIN_IMAGES,
    OPERATOR,
    OPERATOR_IMAGES,
    RELEASE_IMAGES,
    ReleaseImage,
    final_stage,
    release_file,
)
from harness.nodeimages import normalize
from tests.release_images import (
    final_stage_config,
    final_stage_instructions,
    image_files,
    manager_manifest_container,
    rendered_containers,
)

OPERATOR_DIR = "controller/deploy/operator"
CR_CRD = "operator.jumpstarter.dev_jumpstarters.yaml"


def test_the_controller_image_is_the_crs_default_for_the_controller_and_the_routers() -> None:
    for version in crd_in(source_tarball(), CR_CRD)["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        for field in ("controller", "routers"):
            # `default: {}` on the field: a CR that names neither still gets the image
            assert spec[field]["default"] == {}
            assert spec[field]["properties"]["image"]["default"] == CONTROLLER_IMAGE


def test_the_operator_renders_the_controller_and_router_images_from_those_fields() -> None:
    fields = {name: field for name, (field, _) in rendered_containers().items()}
    assert fields == {"manager": "Controller", "router": "Routers"}


def test_the_releases_sample_cr_and_deploy_script_keep_that_image() -> None:
    sample = yaml.safe_load(
        release_file(f"{OPERATOR_DIR}/config/samples/operator_v1alpha1_jumpstarter.yaml")
    )
    assert sample["kind"] == "Jumpstarter" and not sample.get("spec")  # every default
    script = release_file("controller/hack/deploy_with_operator.sh")
    assert re.findall(r"^\s+image: (.*)$", script, re.M) == ["${IMAGE_REPO}", "${IMAGE_REPO}"]
    # IMAGE_REPO is IMG without its tag; the CRI reads a name without one as `:latest`
    (img,) = re.findall(r"^IMG=\$\{IMG:-(.*)\}$", release_file("controller/hack/deploy_vars"), re.M)
    assert normalize(img.rsplit(":", 1)[0]) == img == CONTROLLER_IMAGE


def _make_variables(makefile: str) -> dict[str, str]:
    """`NAME ?= value` lines, each `$(OTHER)` in a value that the lines above set expanded."""
    found: dict[str, str] = {}
    for name, value in re.findall(r"^(\w+) \?= (.*)$", makefile, re.M):
        found[name] = re.sub(r"\$\((\w+)\)", lambda m: found.get(m[1], m[0]), value.strip())
    return found


def test_the_operator_image_is_its_manager_manifests_and_the_release_builds() -> None:
    image, _ = manager_manifest_container()
    built = _make_variables(release_file(f"{OPERATOR_DIR}/Makefile"))["IMG"]
    assert (image, built) == OPERATOR_IMAGES


def test_the_shipped_kustomization_names_a_tag_no_build_of_the_release_carries() -> None:
    """`kubectl apply -k config/default` as the tarball ships it names
    `jumpstarter-operator:0.8.1-rc.1`: an install must set the image as the release's
    `make deploy` does (`kustomize edit set image`), or apply a name tagged here."""
    (entry,) = yaml.safe_load(release_file(f"{OPERATOR_DIR}/config/manager/kustomization.yaml"))[
        "images"
    ]
    assert f"{entry['newName']}:{entry['newTag']}" not in OPERATOR_IMAGES
    assert entry["newTag"] == "0.8.1-rc.1"


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.key)
def test_each_image_is_its_containerfiles_final_stage_on_the_base(image: ReleaseImage) -> None:
    release = release_file(image.containerfile, image.source)
    ours = final_stage(release, "localhost/base:1", image.programs)
    assert ours.splitlines()[0] == "FROM localhost/base:1"
    unchanged = [i for i in final_stage_instructions(release) if i[0] != "COPY"]
    assert [i for i in final_stage_instructions(ours) if i[0] != "COPY"] == unchanged
    assert final_stage_config(ours) == final_stage_config(release)
    # the same files, each from the build context at its builder-stage path
    relative = {path: source.lstrip("/") for path, source in image_files(release).items()}
    assert image_files(ours) == relative


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.key)
def test_each_program_is_the_package_the_builder_stage_builds(image: ReleaseImage) -> None:
    """The builder stage's `go build -o NAME PACKAGE` (in the module its `cd` or WORKDIR
    names) makes the file the final stage copies: the build's binary of that package."""
    release = release_file(image.containerfile, image.source)
    outputs = dict(re.findall(r"-o\s+(\S+)\s+(\S+)", release))
    binaries = {b.name: b for b in image.source.binaries}
    for path, program in image.programs.items():
        binary = binaries[program]
        package = outputs[posixpath.basename(path)]
        assert posixpath.normpath(posixpath.dirname(package)) == posixpath.normpath(binary.package)
        # the module's folder below `controller/` ends the builder's path
        module = binary.module.removeprefix("controller").strip("/")
        assert posixpath.dirname(path).endswith(f"/{module}" if module else "/build")


def test_the_deployments_run_programs_the_images_hold() -> None:
    """The controller Deployment runs the controller image's entrypoint, the routers its
    `/router`, the operator's Deployment its `/manager`: each the program it must be."""
    controller = image_files(release_file(CONTROLLER.containerfile))
    (entrypoint,) = final_stage_config(release_file(CONTROLLER.containerfile))["Entrypoint"]
    rendered = {name: container for name, (_, container) in rendered_containers().items()}
    assert rendered["manager"].command is None
    assert CONTROLLER.programs[controller[entrypoint]] == "controller"
    (router,) = rendered["router"].command or ()
    assert CONTROLLER.programs[controller[router]] == "router"
    _, manager = manifest = manager_manifest_container()
    (command,) = manager.command or ()
    operator = image_files(release_file(OPERATOR.containerfile))
    assert OPERATOR.programs[operator[command]] == "operator", manifest


def test_the_images_come_from_the_release_tarball_and_main_s() -> None:
    assert {image.source.tarball() for image in RELEASE_IMAGES} == {RELEASE_SOURCE.tarball()}
    assert {image.source.tarball() for image in MAIN_IMAGES} == {MAIN_SOURCE.tarball()}
    assert MAIN_EXPORTERSET_CONTROLLER.source.tarball() == MAIN_SOURCE.tarball()
    assert (*RELEASE_IMAGES, *MAIN_IMAGES, MAIN_EXPORTERSET_CONTROLLER) == IMAGES


def test_main_s_exporterset_controller_image_is_its_operators_default() -> None:
    """A `Jumpstarter` resource that names no `exporterSets.image` runs this name."""
    crd = crd_in(MAIN_SOURCE.tarball(), CR_CRD)
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        image = spec["exporterSets"]["properties"]["image"]
        assert image["default"] == MAIN_EXPORTERSET_CONTROLLER.names[0]
