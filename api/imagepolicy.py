"""The administrator's image allow-list: which images a class or set may name.

One source for the list, its flags and its matching rule: the webhook (admission), the
reconciler (the set's `ImagesAllowed` condition; no new instance from a refused image)
and `virtualtarget validate` take the same two flags (`add_flags`, `from_flags`) and ask
the same `ImagePolicy.refusal`.

The rule. A reference is allowed when its repository, read as the container runtime
resolves it (no registry host means `docker.io`, and a one-part Docker Hub name means
`library/NAME`), is a listed prefix or lies below one by whole path segments:
`quay.io/jumpstarter-dev/` (or without the slash) allows `quay.io/jumpstarter-dev/jumpstarter`
and `quay.io/jumpstarter-dev/virtual/qemu-runtime`, not `quay.io/jumpstarter-dev-mirror/x`.
Every prefix starts with a registry host. With `require_digest`, a reference must also be
pinned as `@sha256:<64 hex digits>`. The default images of the provisioners this project
knows, and the instance images it ships (`api.provisioners.SHIPPED_IMAGES`), always pass.
No list and no digest requirement: no policy, every image passes.
No I/O.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from api.images import image_reference_errors
from api.provisioners import DEFAULT_IMAGES, SHIPPED_IMAGES

__all__ = [
    "ALLOW_LIST",
    "NO_ALLOW_LIST",
    "ImagePolicy",
    "ImageRole",
    "add_flags",
    "effective_images",
    "from_flags",
    "startup_line",
]

ALLOW_LIST = "the administrator's image allow-list"
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = ("index.docker.io", "registry-1.docker.io")
_REFUSALS_MAX = 4096
# The start-up warning of a webhook or reconciler given neither flag.
NO_ALLOW_LIST = (
    "no image allow-list: every image passes (--allowed-image-prefixes is not set; "
    "the shipped overlays set it)"
)


def _always() -> frozenset[str]:
    defaults = [ref for images in DEFAULT_IMAGES.values() for ref in images.values()]
    return frozenset([*defaults, *SHIPPED_IMAGES])


def _is_host(segment: str) -> bool:
    return "." in segment or ":" in segment or segment == "localhost"


def _host(segment: str) -> str:
    host = segment.lower()
    return _DOCKER_HUB if host in _DOCKER_HUB_ALIASES else host


@lru_cache(maxsize=4096)  # the same few references are checked on every review and pass
def repository(reference: str) -> str:
    """`busybox:1` -> `docker.io/library/busybox`; `Quay.io/org/repo@sha256:...` ->
    `quay.io/org/repo`: the repository a container runtime pulls `reference` from."""
    name = reference.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    if ":" in last:  # a tag; a colon before the last slash is a registry port
        name = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    first, slash, rest = name.partition("/")
    if slash and _is_host(first):
        return f"{_host(first)}/{rest}"
    return f"{_DOCKER_HUB}/{name}" if slash else f"{_DOCKER_HUB}/library/{name}"


def _prefix(text: str) -> str:
    """A listed prefix in its matching form (host lowercased, no trailing slash), or
    ValueError saying what is wrong with it."""
    given = text.strip()
    bare = given.rstrip("/")
    first, _, rest = bare.partition("/")
    if not bare or not _is_host(first):
        raise ValueError(
            f"{given!r}: must start with a registry host, e.g. quay.io/jumpstarter-dev/ "
            "(docker.io/ for Docker Hub)"
        )
    if "@" in bare or (rest and ":" in rest):
        raise ValueError(f"{given!r}: must name a registry or repository path, not a tag or digest")
    if rest and image_reference_errors(bare):
        raise ValueError(f"{given!r}: {image_reference_errors(bare)[0]}")
    return f"{_host(first)}/{rest}" if rest else _host(first)


@dataclass(frozen=True)
class ImagePolicy:
    """The allow-list in force: `prefixes` as given (empty: any repository) and whether
    a digest is required."""

    prefixes: tuple[str, ...] = ()
    require_digest: bool = False
    always: frozenset[str] = field(default_factory=_always)
    _match: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # reference -> refusal: the same few images are checked on every review
    _refusals: dict[str, str | None] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_match", tuple(_prefix(p) for p in self.prefixes))

    @classmethod
    def from_settings(
        cls, prefixes: Iterable[str], require_digest: bool = False
    ) -> ImagePolicy | None:
        """The policy for these settings, None when they configure none (everything
        passes); ValueError naming a malformed prefix."""
        listed = tuple(dict.fromkeys(p.strip() for p in prefixes if p.strip()))
        if not listed and not require_digest:
            return None
        return cls(listed, require_digest)

    def allows_repository(self, reference: str) -> bool:
        if not self.prefixes:
            return True
        name = repository(reference)
        return any(name == p or name.startswith(p + "/") for p in self._match)

    def refusal(self, reference: str) -> str | None:
        """Why the list refuses `reference` (a field-error detail naming the allowed
        prefixes), or None when it is allowed."""
        try:
            return self._refusals[reference]
        except KeyError:
            pass
        if len(self._refusals) >= _REFUSALS_MAX:
            self._refusals.clear()
        found = self._refusals[reference] = self._refusal(reference)
        return found

    def _refusal(self, reference: str) -> str | None:
        if reference in self.always:
            return None
        pinned = not self.require_digest or bool(_DIGEST.search(reference))
        if self.allows_repository(reference):
            if pinned:
                return None
            return f"must be pinned by digest (@sha256:<64 hex digits>): {ALLOW_LIST} requires one"
        digest = "" if pinned else "; @sha256: digest required"
        return f"not on {ALLOW_LIST} (allowed prefixes: {', '.join(self.prefixes)}{digest})"

    def describe(self) -> str:
        """One line for the start-up log."""
        listed = ", ".join(self.prefixes) if self.prefixes else "any repository"
        digest = ", digest required" if self.require_digest else ""
        return (
            f"image allow-list: {listed}{digest} (and the provisioners' default and shipped images)"
        )


@dataclass(frozen=True, slots=True)
class ImageRole:
    """The image one container role of an instance runs, and which object names it."""

    role: str
    reference: str
    source: str  # "ExporterSet", "VirtualTargetClass" or "" (the provisioner's default)


def _images(spec: Any) -> dict[str, Any]:
    # Decoded JSON or YAML: an object is a `dict` (a tenth of the cost of the Mapping ABC).
    images = spec.get("images") if isinstance(spec, dict) else None
    return images if isinstance(images, dict) else {}


def _named(images: dict[str, Any], role: str) -> str:
    node = images.get(role)
    image = node.get("image") if isinstance(node, dict) else None
    return image if isinstance(image, str) and image else ""


def effective_images(
    set_spec: Any, class_spec: Any, defaults: Mapping[str, str]
) -> list[ImageRole]:
    """Each role's image after the merge: the set's over the class's over `defaults`
    (the provisioner's; a role without a default and named by neither is left out)."""
    named = (("ExporterSet", _images(set_spec)), ("VirtualTargetClass", _images(class_spec)))
    chosen_roles = []
    for role in map(str, dict.fromkeys([*defaults, *named[1][1], *named[0][1]])):
        chosen = ImageRole(role, defaults.get(role, ""), "")
        for source, images in named:
            if image := _named(images, role):
                chosen = ImageRole(role, image, source)
                break
        if chosen.reference:
            chosen_roles.append(chosen)
    return chosen_roles


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The allow-list's flags, the same for `webhook`, `reconcile` and `validate`."""
    parser.add_argument(
        "--allowed-image-prefixes",
        action="append",
        default=[],
        metavar="PREFIX[,PREFIX...]",
        help="images a class or set may name: repositories under these prefixes, by whole "
        "path segments (e.g. quay.io/jumpstarter-dev/); repeatable (default: any image)",
    )
    parser.add_argument(
        "--require-image-digest",
        action="store_true",
        help="images a class or set names must be pinned by @sha256: digest",
    )


def from_flags(args: argparse.Namespace) -> ImagePolicy | None:
    """The policy the flags configure; ValueError naming a malformed prefix."""
    prefixes = [p for given in args.allowed_image_prefixes for p in given.split(",")]
    return ImagePolicy.from_settings(prefixes, args.require_image_digest)


def startup_line(policy: ImagePolicy | None) -> tuple[int, str]:
    """The level and text a component logs at start for `policy`: a warning without one
    (its metric `virtualtarget_image_allow_list_enabled` is then 0 too)."""
    if policy is None:
        return logging.WARNING, NO_ALLOW_LIST
    return logging.INFO, policy.describe()
