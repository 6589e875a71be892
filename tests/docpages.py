"""The commands and files of a documentation page, for the tests that run them as written.

A page marks what a test takes by the info string of a fenced block (GitHub and the
site show the first word as the language and nothing of the rest):

    ```sh run=NAME          commands a reader runs, in order; a test runs them verbatim
    ```yaml file=PATH       a file a reader writes at PATH (from the repository's top)
    ```text output=NAME     what the command before it prints (tests/tutorialpage.py)

A command is one line, or lines joined by a trailing backslash; blank lines and lines
starting with `#` are not commands. `Session` runs commands as a reader's shell would:
each in bash (with pipefail), the environment and the folder carried from one to the next
(so an `export` holds for the commands after it), and the first failure stops the test
with the page's line, the command and its output.

The only change a test may make to a command is a `Substitution` the page itself states
in the words `` `NEW` for `OLD` ``; `Substitution.check(page)` fails a test whose page does
not say it, so a reworded page changes what is run, never the other way round.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Block",
    "Command",
    "CommandFailed",
    "Ran",
    "Session",
    "Substitution",
    "blocks",
    "commands",
    "files",
]

_FENCE = re.compile(r"^(```+)(.*)$")
_CONTINUED = re.compile(r"[ \t]*\\\n[ \t]*")
# What a shell session has of its own, not taken from the environment dump.
_SHELL_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})


@dataclass(frozen=True)
class Block:
    """A fenced block of `page`, its body starting on line `line` (1-based)."""

    page: Path
    line: int
    language: str
    attributes: Mapping[str, str]
    text: str


@dataclass(frozen=True)
class Command:
    text: str  # as the page writes it, continuations joined by a space
    page: Path
    line: int

    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of the page, in order."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        fence, info = opened.group(1), opened.group(2).split()
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise ValueError(f"{page.name}:{i + 1}: fenced block never closed")
        attributes = dict(word.split("=", 1) for word in info[1:] if "=" in word)
        body = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 2, info[0] if info else "", attributes, body))
        i = end + 1
    return found


def commands(page: Path, name: str) -> list[Command]:
    """The commands of the page's `run=NAME` blocks, in order; ValueError when none."""
    marked = [b for b in blocks(page) if b.attributes.get("run") == name]
    if not marked:
        raise ValueError(f"{page.name}: no block marked run={name}")
    found: list[Command] = []
    for block in marked:
        text = block.text
        offset = 0
        for logical in re.split(r"(?<!\\)\n", text):
            line = block.line + offset
            offset += logical.count("\n") + 1
            joined = _CONTINUED.sub(" ", logical).strip()
            if joined and not joined.startswith("#"):
                found.append(Command(joined, page, line))
    return found


def files(page: Path, path: str) -> list[Block]:
    """The page's `file=PATH` blocks for `path`, in order; ValueError when none."""
    marked = [b for b in blocks(page) if b.attributes.get("file") == path]
    if not marked:
        raise ValueError(f"{page.name}: no block marked file={path}")
    return marked


@dataclass(frozen=True)
class Substitution:
    """`old` replaced by `new` wherever it stands as a whole word of a command (not as
    part of a longer path or name)."""

    old: str
    new: str

    def check(self, page: Path) -> None:
        """The page states this substitution; AssertionError when it does not."""
        said = f"`{self.new}` for `{self.old}`"
        assert said in " ".join(page.read_text().split()), f"{page.name} does not say {said}"

    def apply(self, text: str) -> str:
        pattern = rf"(?<![\w./-]){re.escape(self.old)}(?![\w./-])"
        replaced, count = re.subn(pattern, self.new, text)
        return replaced if count else text

    def applies_to(self, text: str) -> bool:
        return self.apply(text) != text


@dataclass(frozen=True)
class Ran:
    command: Command
    run: str  # what ran: the command after the substitutions
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class CommandFailed(AssertionError):
    """A page's command exited non-zero; the message names the page's line."""


@dataclass
class Session:
    """A reader's shell: commands run in `cwd` with `env`, both carried on."""

    cwd: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout: float = 900.0
    ran: list[Ran] = field(default_factory=list)

    def run(
        self,
        command: Command,
        substitutions: Iterable[Substitution] = (),
        *,
        check: bool = True,
        timeout: float | None = None,
    ) -> Ran:
        text = command.text
        for substitution in substitutions:
            text = substitution.apply(text)
        with tempfile.TemporaryDirectory(prefix="docpages-") as tmp:
            state = Path(tmp)
            # The command, then what the next one inherits: its environment and folder.
            script = (
                f"set -o pipefail\n{text}\n__status=$?\n"
                f"env -0 > {shlex.quote(str(state / 'env'))}\n"
                f"pwd > {shlex.quote(str(state / 'cwd'))}\nexit $__status\n"
            )
            started = time.monotonic()
            done = subprocess.run(
                ["bash", "-c", script],
                cwd=self.cwd,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout,
            )
            seconds = time.monotonic() - started
            if (state / "env").is_file():
                dumped = (state / "env").read_text().split("\0")
                self.env = {
                    k: v
                    for k, _, v in (item.partition("=") for item in dumped if "=" in item)
                    if k not in _SHELL_OWN
                }
                self.cwd = Path((state / "cwd").read_text().strip())
        ran = Ran(command, text, done.returncode, done.stdout, done.stderr, seconds)
        self.ran.append(ran)
        if check and done.returncode != 0:
            raise CommandFailed(
                f"{command.where()}: `{text}` exited {done.returncode}\n"
                f"stdout: {done.stdout.strip()}\nstderr: {done.stderr.strip()}"
            )
        return ran

    def run_all(
        self, commands: Sequence[Command], substitutions: Sequence[Substitution] = ()
    ) -> list[Ran]:
        """Run each command in order, stopping at the first that fails."""
        return [self.run(c, substitutions) for c in commands]
