"""A Dockerfile (or Containerfile) read as its instructions, for the tests that hold the
images built here to the files they follow."""

from __future__ import annotations

import re

__all__ = ["final_stage_instructions", "stages"]


def stages(text: str) -> list[list[tuple[str, str]]]:
    """Instructions per stage, each (INSTRUCTION, its arguments) from its FROM on,
    continuation lines joined, comments and blank lines dropped."""
    result: list[list[tuple[str, str]]] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, args = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            result.append([])
        if result:  # an ARG before the first FROM belongs to no stage
            result[-1].append((instruction.upper(), " ".join(args.split())))
    return result


def final_stage_instructions(text: str) -> list[tuple[str, str]]:
    """The last stage's instructions after its FROM."""
    return stages(text)[-1][1:]
