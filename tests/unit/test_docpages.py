"""The page reader and the shell session the doc-driven tests run pages with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docpages import (
    Command,
    CommandFailed,
    Session,
    Substitution,
    blocks,
    commands,
    files,
)

PAGE = """# A page

Some text.

```sh run=first
export GREETING=hello FOLDER=sub  # a comment stays with its command
# a comment line is no command

mkdir -p $FOLDER && cd $FOLDER
echo "$GREETING from" \\
    "$(basename "$PWD")"
```

    an indented block is no fenced block

```yaml file=deploy/overlays/mine/kustomization.yaml
resources: [../self-signed]
```

```sh
echo unmarked
```

```sh run=first
false
```
"""


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    return path


def test_blocks_keep_their_language_attributes_and_first_line(page: Path) -> None:
    found = blocks(page)
    assert [(b.language, dict(b.attributes), b.line) for b in found] == [
        ("sh", {"run": "first"}, 6),
        ("yaml", {"file": "deploy/overlays/mine/kustomization.yaml"}, 17),
        ("sh", {}, 21),
        ("sh", {"run": "first"}, 25),
    ]
    (kustomization,) = files(page, "deploy/overlays/mine/kustomization.yaml")
    assert kustomization.text == "resources: [../self-signed]\n"


def test_commands_join_continuations_and_skip_comments_and_blank_lines(page: Path) -> None:
    found = commands(page, "first")
    assert [(c.text, c.line) for c in found] == [
        ("export GREETING=hello FOLDER=sub  # a comment stays with its command", 6),
        ("mkdir -p $FOLDER && cd $FOLDER", 9),
        ('echo "$GREETING from" "$(basename "$PWD")"', 10),
        ("false", 25),
    ]
    assert found[2].where() == "page.md:10"
    with pytest.raises(ValueError, match="no block marked run=second"):
        commands(page, "second")
    with pytest.raises(ValueError, match="no block marked file=elsewhere"):
        files(page, "elsewhere")


def test_an_unclosed_fence_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.md"
    path.write_text("text\n```sh run=x\necho\n")
    with pytest.raises(ValueError, match=r"broken\.md:2: fenced block never closed"):
        blocks(path)


def test_a_session_carries_exports_and_the_folder_and_stops_at_a_failure(
    page: Path, tmp_path: Path
) -> None:
    session = Session(cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    first, folder, greeting, failing = commands(page, "first")
    session.run_all([first, folder, greeting])
    assert session.ran[-1].stdout == "hello from sub\n"
    assert session.cwd == tmp_path / "sub"
    assert session.env["GREETING"] == "hello"
    with pytest.raises(CommandFailed, match=r"page.md:25: `false` exited 1"):
        session.run(failing)
    # A pipeline fails when any part fails (`set -o pipefail`).
    piped = Command("false | cat", failing.page, failing.line)
    assert session.run(piped, check=False).returncode == 1


def test_a_substitution_replaces_whole_words_and_must_be_stated_by_the_page(
    tmp_path: Path,
) -> None:
    node = Substitution("deploy/overlays/self-signed", "deploy/overlays/self-signed-exporter-crd")
    command = "kubectl delete -k deploy/overlays/self-signed --ignore-not-found"
    assert node.apply(command) == (
        "kubectl delete -k deploy/overlays/self-signed-exporter-crd --ignore-not-found"
    )
    # Not inside a longer path, nor twice.
    for untouched in ("ls deploy/overlays/self-signed/certs", node.new, "x" + node.old):
        assert not node.applies_to(untouched)
    stated = tmp_path / "stated.md"
    stated.write_text(f"uninstall with `{node.new}`\nfor `{node.old}`.\n")
    node.check(stated)
    silent = tmp_path / "silent.md"
    silent.write_text("nothing about it\n")
    with pytest.raises(AssertionError, match="does not say"):
        node.check(silent)
