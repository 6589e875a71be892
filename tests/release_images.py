"""What Jumpstarter release 0.9.0's sources say of its images, read from the tarball:
the final stage of each Containerfile, the containers the operator renders for a
`Jumpstarter` CR (its Go source), and the operator's own manager manifest.

The tests of `harness.jumpstarter_images` check the images built here against these.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from harness.jumpstarter_images import release_file
from tests.dockerfiles import final_stage_instructions

__all__ = [
    "OPERATOR_MANIFEST",
    "RECONCILER",
    "Container",
    "final_stage_config",
    "final_stage_instructions",
    "image_files",
    "manager_manifest_container",
    "rendered_containers",
]

OPERATOR_MANIFEST = "controller/deploy/operator/config/manager/manager.yaml"
RECONCILER = "controller/deploy/operator/internal/controller/jumpstarter/jumpstarter_controller.go"

# A container literal of the Deployments the operator renders: its name, the CR field its
# image comes from, then its Command and Args where it sets them.
_CONTAINER = re.compile(
    r'Name:\s+"(?P<name>[\w-]+)",\s*'
    r"Image:\s+jumpstarter\.Spec\.(?P<field>\w+)\.Image,\s*"
    r"ImagePullPolicy:\s+jumpstarter\.Spec\.\w+\.ImagePullPolicy,\s*"
    r"(?:Command:\s+\[\]string\{(?P<command>[^}]*)\},\s*)?"
    r"(?:Args:\s+\[\]string\{(?P<args>[^}]*)\},)?"
)


@dataclass(frozen=True)
class Container:
    """A container as a manifest runs it: `command` None runs the image's entrypoint."""

    command: tuple[str, ...] | None
    args: tuple[str, ...]

    def flags(self) -> list[str]:
        """The flags' names in `args` (`--leader-elect`, `-a=b` -> `leader-elect`, `a`)."""
        return [arg.lstrip("-").split("=", 1)[0] for arg in self.args if arg.startswith("-")]


def _strings(literal: str | None) -> tuple[str, ...]:
    return tuple(json.loads(f"[{literal.strip().rstrip(',')}]")) if literal else ()


def rendered_containers() -> dict[str, tuple[str, Container]]:
    """The containers of the controller and router Deployments the operator renders, by
    container name: the `Jumpstarter` CR's field their image comes from (`Controller`,
    `Routers`) and how they run it (createControllerDeployment, createRouterDeployment)."""
    return {
        m["name"]: (
            m["field"],
            Container(_strings(m["command"]) if m["command"] else None, _strings(m["args"])),
        )
        for m in _CONTAINER.finditer(release_file(RECONCILER))
    }


def manager_manifest_container() -> tuple[str, Container]:
    """The operator's own Deployment's container: its image and how it runs it."""
    documents = list(yaml.safe_load_all(release_file(OPERATOR_MANIFEST)))
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    image: str = container["image"]
    command = tuple(container["command"]) if "command" in container else None
    return image, Container(command, tuple(container.get("args", ())))


def final_stage_config(containerfile: str) -> dict[str, Any]:
    """The image configuration the last stage sets, as a docker-archive's config keys."""
    config: dict[str, Any] = {}
    for word, rest in final_stage_instructions(containerfile):
        if word == "WORKDIR":
            config["WorkingDir"] = rest
        elif word == "USER":
            config["User"] = rest
        elif word == "ENTRYPOINT":
            config["Entrypoint"] = json.loads(rest)
    return config


def image_files(containerfile: str) -> dict[str, str]:
    """The files the last stage copies, by their path in the image: where each comes from."""
    workdir, files = "/", {}
    for word, rest in final_stage_instructions(containerfile):
        if word == "WORKDIR":
            workdir = posixpath.join(workdir, rest)
        elif word == "COPY":
            *sources, target = [w for w in shlex.split(rest) if not w.startswith("--")]
            folder = posixpath.join(workdir, target)
            for source in sources:
                files[posixpath.normpath(posixpath.join(folder, posixpath.basename(source)))] = (
                    source
                )
    return files
