"""One licence and one version, as pyproject.toml declares them, wherever they are named."""

from __future__ import annotations

import re
import tomllib

from harness.deploy_render import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
PRODUCT_IMAGE = re.compile(r"ghcr\.io/jumpstarter-dev/virtualtarget:([\w.\-]+)")


def test_the_licence_is_apache_2_0_in_full() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text


def test_every_image_built_here_carries_the_licence_label() -> None:
    dockerfiles = [REPO / "Dockerfile", *sorted((REPO / "images").glob("*/Dockerfile"))]
    assert len(dockerfiles) >= 3
    for dockerfile in dockerfiles:
        labels = re.findall(
            r'org\.opencontainers\.image\.licenses="([^"]+)"', dockerfile.read_text()
        )
        assert labels == [PROJECT["license"]], dockerfile


def test_every_file_naming_the_product_image_names_this_version() -> None:
    """`VERSION` is a page's placeholder for any version."""
    named = {}
    for pattern in (
        "deploy/**/*.yaml",
        "examples/**/*.yaml",
        "docs/*.md",
        "README.md",
        "Dockerfile",
    ):
        for path in REPO.glob(pattern):
            for tag in set(PRODUCT_IMAGE.findall(path.read_text())) - {"VERSION"}:
                named.setdefault(tag, []).append(path.relative_to(REPO).as_posix())
    assert set(named) == {PROJECT["version"]}, named
