"""docs/tutorial.md as the tests read it: its commands, what the page shows each one
printing, and the comparison of the two after the names and times a run makes anew.

A `run=NAME` block (tests/docpages.py) may carry `exit=N` (the exit code the page
expects; 0 otherwise) and be followed by a `text output=NAME` block: what its last command
prints, stdout then stderr. An output block that follows no command block is shown for a
command the page has the reader run elsewhere (`make run` in its own shell);
`order=any` compares its lines whatever their order (two threads print them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.deploy_render import REPO
from tests.docpages import Block, Command, blocks, commands

__all__ = [
    "MAKE_RUN",
    "PAGE",
    "PAGE_CHECKOUT",
    "TUTORIAL",
    "Step",
    "normalised",
    "shown",
    "steps",
]

PAGE = REPO / "docs" / "tutorial.md"
TUTORIAL = "tutorial"
MAKE_RUN = "make-run"
# Where the page's reader keeps the checkout, in what it shows.
PAGE_CHECKOUT = "/home/you/virtualtarget"

# The suffix kube-apiserver appends to a generateName (its alphabet has no vowels).
_GENERATED = re.compile(r"(?<=-)[bcdfghjklmnpqrstvwxz2456789]{5}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
_PORT = re.compile(r"\b127\.0\.0\.1:\d+")
_SECONDS = re.compile(r"\bin \d+(?:\.\d+)? s\b")  # how long a start took
_AGE = re.compile(r"\s\d+[smhd](?:\d+[smhd])?$")  # kubectl's AGE, the last column


@dataclass(frozen=True)
class Step:
    """A command block of the page, the exit code it expects, and what it shows printed."""

    commands: list[Command]
    exit: int
    output: Block | None


def steps(page: Path, name: str) -> list[Step]:
    """The page's `run=NAME` blocks in order, each with the output block after it."""
    found: list[Step] = []
    listed = blocks(page)
    by_line = {c.line: c for c in commands(page, name)}
    for i, block in enumerate(listed):
        if block.attributes.get("run") != name:
            continue
        count = block.text.count("\n")
        inside = [
            c for line, c in sorted(by_line.items()) if block.line <= line < block.line + count
        ]
        after = listed[i + 1] if i + 1 < len(listed) else None
        output = after if after is not None and after.attributes.get("output") == name else None
        found.append(Step(inside, int(block.attributes.get("exit", "0")), output))
    return found


def shown(page: Path, name: str) -> Block:
    """The page's one `output=NAME` block."""
    (block,) = [b for b in blocks(page) if b.attributes.get("output") == name]
    return block


def normalised(text: str, checkouts: Iterable[str] = ()) -> list[str]:
    """The lines of `text` with what a run makes anew replaced: the checkout's path,
    generated name suffixes, times, loopback ports, ages and how long a start took; runs of
    blanks as one (a column is as wide as its longest value) and trailing blank lines
    dropped."""
    for checkout in (*checkouts, PAGE_CHECKOUT):
        text = text.replace(checkout, "CHECKOUT")
    text = _PORT.sub("127.0.0.1:PORT", _TIME.sub("TIME", _GENERATED.sub("xxxxx", text)))
    text = _SECONDS.sub("in N s", text)
    lines = [re.sub(r"[ \t]+", " ", _AGE.sub(" AGE", line)).rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
