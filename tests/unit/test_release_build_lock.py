"""An earlier commit's tree builds its release images with its own harness, on the
working tree's buildah storage (`harness.release`): both must take one build lock."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from harness.release import share_build_lock


def test_an_older_tree_s_builds_wait_for_the_working_tree_s(tmp_path: Path) -> None:
    shared, older = tmp_path / "images", tmp_path / "src-older" / "images"
    older.mkdir(parents=True)
    (older / ".build.lock").write_text("")  # its own, as an earlier harness left it
    share_build_lock(older, shared)
    with (shared / ".build.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # As `harness.images.build_lock` opens it, in whichever tree's harness.
        with (older / ".build.lock").open("w") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    share_build_lock(older, shared)  # again: nothing changes
    assert (older / ".build.lock").resolve() == (shared / ".build.lock").resolve()
