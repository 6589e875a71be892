"""The README and the manual against what they name: the README's shape and commands,
the design sections the code cites, and the flags of every command."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from harness.deploy_render import REPO
from tests.docpages import commands
from tests.installpage import INSTALL_SELF_SIGNED
from tests.installpage import PAGE as INSTALL_PAGE
from tests.tutorialpage import PAGE as TUTORIAL_PAGE
from tests.tutorialpage import TUTORIAL
from virtualtarget.cli import SUBCOMMANDS

README = REPO / "README.md"
DESIGN = REPO / "docs" / "design.md"
FLAGS = REPO / "docs" / "flags.md"
README_LIMIT = 150
# Where a citation of the design may stand: the code, the tests, the pages.
CITING = ("api", "codegen", "webhook", "reconciler", "certs", "scrape", "virtualtarget", "tests")
CITATION = re.compile(r"(?:DESIGN|design\.md) §(\d+)")


def _sh_blocks(text: str) -> list[list[str]]:
    """The commands of each ```sh block, continuations joined."""
    found = []
    for body in re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M):
        joined = re.sub(r"\s*\\\n\s*", " ", body)
        found.append([line.strip() for line in joined.splitlines() if line.strip()])
    return found


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_LIMIT
    first_two = [
        line.split("#")[0].strip() for line in text.splitlines() if line.startswith("    make ")
    ][:2]
    assert first_two == ["make run", "make test"]
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == [
        "Why this one",
        "Quick start",
        "Install on a cluster",
        "A first pool",
        "Documentation",
        "Contributing",
    ]


def test_the_readmes_commands_are_the_pages_commands() -> None:
    install, first_pool = _sh_blocks(README.read_text())
    build, *certs_and_apply = install
    assert build in INSTALL_PAGE.read_text()
    assert certs_and_apply == [c.text for c in commands(INSTALL_PAGE, INSTALL_SELF_SIGNED)]
    tutorial = {c.text for c in commands(TUTORIAL_PAGE, TUTORIAL)}
    assert set(first_pool) <= tutorial


def test_every_link_of_the_readme_names_a_file_here() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [target for target in links if not target.startswith("https://")]
    assert local  # the README links its pages
    for target in local:
        assert (REPO / target).exists(), target


def _citations() -> list[tuple[Path, str]]:
    found = []
    for folder in CITING:
        for path in sorted((REPO / folder).rglob("*.py")):
            found += [(path, n) for n in CITATION.findall(path.read_text())]
    for path in [README, *sorted((REPO / "docs").rglob("*.md"))]:
        found += [(path, n) for n in CITATION.findall(path.read_text())]
    return found


def test_every_citation_of_the_design_names_one_of_its_sections() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", DESIGN.read_text(), re.M))
    cited = _citations()
    assert cited, "the code cites the design"
    for path, number in cited:
        assert number in sections, f"{path.relative_to(REPO)}: §{number}"
    # A citation names the file: a bare "DESIGN" points at no file of the repository.
    bare = "DESIGN" + " §"
    assert not [p for p, _ in cited if bare in p.read_text()]


def _options(command: str) -> set[str]:
    if command == "exporter-set-controller":
        parser = importlib.import_module("reconciler.exporter_set_controller")._parser()
    else:
        parser = argparse.ArgumentParser()
        importlib.import_module(SUBCOMMANDS[command][0]).configure(parser)
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option not in ("-h", "--help")
    }


@pytest.mark.parametrize(
    "command",
    ["webhook", "reconcile", "exporter-set-controller", "plan", "validate", "certs", "simulate"],
)
def test_every_flag_is_on_the_flags_page(command: str) -> None:
    title = f"`{command}`" if command == "exporter-set-controller" else f"`virtualtarget {command}`"
    page = FLAGS.read_text()
    section = page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    options = sorted(_options(command))
    assert options, command  # every command has flags
    for option in options:
        assert f"`{option}" in section or f" `{option}`" in section, (command, option)


def test_every_file_the_pages_name_is_here() -> None:
    """A page that names a source file (`pool/rules/planner.py`) follows it when it moves."""
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    named = [
        (page, path)
        for page in pages
        for path in re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|yaml|md|txt))`", page.read_text())
        if (REPO / path.split("/")[0]).exists()  # not another package's file
        and not path.startswith("deploy/overlays/mine/")
    ]
    assert named  # e.g. docs/development.md names `harness/affected.py`
    for page, path in named:
        assert (REPO / path).exists(), f"{page.relative_to(REPO)}: {path}"


# The pages of the people who develop this product; every other page is for those who
# install and run it, and names no part of the test harness.
DEVELOPERS_PAGES = {"development.md", "design.md", "measurements.md", "benchmarks.md"}
HARNESS_WORDS = (".cluster/", "ctr --address", "pytest")


def test_no_page_for_users_names_the_test_harness() -> None:
    pages = [README, *sorted((REPO / "docs").rglob("*.md"))]
    for_users = [p for p in pages if p.name not in DEVELOPERS_PAGES]
    assert len(for_users) > 10  # README, install, tutorial, the references, ...
    named = {
        p.relative_to(REPO).as_posix(): word
        for p in for_users
        for word in HARNESS_WORDS
        if word in p.read_text()
    }
    assert named == {}
