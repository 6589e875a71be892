"""The Jumpstarter release this product targets, in one place.

The provisioners' default image tags (`api.provisioners`) and the pinned test
dependencies (pyproject.toml) follow it; a unit test keeps them equal. No I/O.
"""

from __future__ import annotations

__all__ = ["JUMPSTARTER_RELEASE", "JUMPSTARTER_REPOSITORIES"]

JUMPSTARTER_RELEASE = "0.9.0"
# Where Jumpstarter publishes its images: the default images live under it, and the
# shipped overlays' image allow-list names it (deploy/components/jumpstarter-images).
JUMPSTARTER_REPOSITORIES = "quay.io/jumpstarter-dev/"
