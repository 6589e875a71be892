"""What the image tests share: archives unpacked for runc."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from harness.images import Unpacked, unpacked

__all__ = ["unpacked_each"]


@contextlib.contextmanager
def unpacked_each(
    archives: Mapping[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Unpacked]]:
    """Each archive's root filesystem, by its key (all removed afterwards)."""
    with contextlib.ExitStack() as stack:
        yield {
            key: stack.enter_context(unpacked(archive, tmp_path_factory.mktemp(key) / "u"))
            for key, archive in archives.items()
        }
